package watchlog

import (
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// Recorder is the raft.StateMachine the node replicates: fsm.Jobs, plus a
// bounded in-memory history of the job events each applied entry produced
// (what Watch serves), and the notifications Claim and the worker runner
// wait on. It adds no state to the replicated one: digests and snapshots
// are fsm.Jobs' own.
type Recorder struct {
	jobs       *fsm.Jobs
	maxEntries int
	maxBytes   int

	mu      sync.Mutex
	ring    []ringEntry // ring[start:] are retained, in index order
	start   int
	bytes   int
	oldest  uint64        // history is complete from this index on
	last    uint64        // last index recorded
	changed chan struct{} // closed and replaced when events are appended
	// claimers are the claims waiting for a claimable job, by queue, in
	// line (claimers.go).
	claimers map[string][]*Claimer
	fences   map[string]map[*fence]struct{}
	// finished holds Finished's registrations by job ID: each channel is
	// closed by the first event recorded after it that leaves the job
	// terminal, or by a restore.
	finished map[string][]chan struct{}
	// turns is Apply's buffer for the turns a submit brings (apply
	// goroutine only).
	turns []Turn
}

// fence is a worker runner's registration for one running job (Fence).
type fence struct {
	token uint64
	end   func(Event)
}

type ringEntry struct {
	index  uint64
	events []Event
	size   int
	// A successful submit, and a successful batch of lease commands while
	// no fence is on its jobs, is recorded undecoded (raw result, entry time) and
	// turned into events when a watcher (or LeaseEnd) first reads it: they
	// are the hot path, watchers are few.
	raw []byte
	at  time.Time
}

var _ raft.StateMachine = (*Recorder)(nil)

// New returns a recorder of a new, empty fsm.Jobs whose history keeps at
// most maxEntries entries and about maxBytes bytes of events.
func New(maxEntries, maxBytes int) *Recorder {
	return &Recorder{
		jobs: fsm.New(), maxEntries: maxEntries, maxBytes: maxBytes, oldest: 1,
		changed: make(chan struct{}), claimers: map[string][]*Claimer{}, fences: map[string]map[*fence]struct{}{},
		finished: map[string][]chan struct{}{},
	}
}

// Jobs returns the replicated state.
func (r *Recorder) Jobs() *fsm.Jobs { return r.jobs }

// Apply applies e to the state and records its events.
func (r *Recorder) Apply(re raft.Entry) []byte {
	e := fsm.Entry(re)
	out := r.jobs.Apply(e)
	e.Time = r.jobs.AppliedTime() // events carry the log time, as job records do
	if t, code, _ := fsm.ResultHead(out); t == fsm.CmdSubmit && code == fsm.CodeOK {
		// The jobs it created pending wake as many waiting claims (a
		// result not scanned wakes every one); no fence ends on a submit.
		turns := r.turns[:0]
		scanned := fsm.ScanSubmit(out, func(queue, kind string) {
			if n := len(turns); n > 0 && turns[n-1].Queue == queue && turns[n-1].Kind == kind {
				turns[n-1].N++
				return
			}
			turns = append(turns, Turn{Queue: queue, Kind: kind, N: 1})
		})
		r.turns = turns
		r.append(ringEntry{index: e.Index, raw: out, at: e.Time, size: len(out)}, wake{all: !scanned, turns: turns})
		clear(turns) // the strings are views of out
		return out
	}
	if r.appendBatchRaw(e, out) {
		return out
	}
	res, err := fsm.DecodeResultWithoutPayloads(out) // events carry no payload
	if err != nil || res.Err() != nil {
		return out
	}
	evs, ready := r.events(e, &res)
	if len(evs) == 0 {
		return out
	}
	r.record(e.Index, evs, ready)
	return out
}

// appendBatchRaw records a successful batch's result (or a lease command's
// proposed alone: a batch of one) undecoded, as a submit's is, when no fence is on a job it touches (a fence must end when
// the entry is applied, so those events are needed now). Whether it wakes
// claimers, which jobs it touches and the state it leaves them in are read
// without decoding it (fsm.ScanBatchStates): the Finished waits of the jobs
// it leaves terminal are woken from that. It reports false when the entry
// is not such a batch or touches a fenced job: the caller decodes it. The
// check and the append are under one lock: a fence set after it finds the
// entry in the history (LeaseEnd decodes it).
func (r *Recorder) appendBatchRaw(e fsm.Entry, out []byte) bool {
	if t, code, _ := fsm.ResultHead(out); (t != fsm.CmdBatch && !fsm.Batchable(t)) || code != fsm.CodeOK {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fenced := false
	var finished []string // views of out
	var jobs func(string, fsm.State) bool
	if len(r.fences) > 0 || len(r.finished) > 0 {
		jobs = func(id string, st fsm.State) bool {
			if _, fenced = r.fences[id]; fenced {
				return false
			}
			if _, waited := r.finished[id]; waited && st.Terminal() {
				finished = append(finished, id)
			}
			return true
		}
	}
	ready, ok := fsm.ScanBatchStates(out, jobs)
	if !ok || fenced {
		return false
	}
	r.appendLocked(ringEntry{index: e.Index, raw: out, at: e.Time, size: len(out)}, wake{all: ready})
	for _, id := range finished {
		r.finishLocked(id)
	}
	return true
}

// finishLocked wakes the Finished waits of job id. mu held.
func (r *Recorder) finishLocked(id string) {
	for _, ch := range r.finished[id] {
		close(ch)
	}
	delete(r.finished, id)
}

func (r *Recorder) record(index uint64, evs []Event, ready bool) {
	size := 0
	for i := range evs {
		size += eventSize(&evs[i])
	}
	r.append(ringEntry{index: index, events: evs, size: size}, wake{all: ready})
}

// wake is whom an applied entry wakes among the waiting claims: those its
// turns go to, or (all) every one.
type wake struct {
	all   bool
	turns []Turn
}

// append adds one entry to the history, wakes watchers and the claims w
// says, and ends the fences its events end.
func (r *Recorder) append(ent ringEntry, w wake) {
	evs := ent.events
	r.mu.Lock()
	r.appendLocked(ent, w)
	var ends []func(Event)
	var endEv []Event
	for i := range evs {
		ev := &evs[i]
		if len(r.finished) > 0 && ev.State.Terminal() {
			r.finishLocked(ev.JobID)
		}
		switch ev.Kind {
		case EventCanceled, EventExpired, EventAcked, EventNaked, EventTermed, EventClaimed:
		default:
			continue
		}
		for f := range r.fences[ev.JobID] {
			if ev.Index > f.token && !(ev.Kind == EventClaimed && ev.Token == f.token) {
				ends = append(ends, f.end)
				endEv = append(endEv, *ev)
			}
		}
	}
	r.mu.Unlock()
	for i, end := range ends {
		end(endEv[i])
	}
}

// appendLocked adds one entry to the history and wakes watchers and the
// claims w says. mu held.
func (r *Recorder) appendLocked(ent ringEntry, w wake) {
	r.ring = append(r.ring, ent)
	r.bytes += ent.size
	r.last = ent.index
	for len(r.ring)-r.start > r.maxEntries || (r.bytes > r.maxBytes && len(r.ring)-r.start > 1) {
		old := &r.ring[r.start]
		r.bytes -= old.size
		r.oldest = old.index + 1
		*old = ringEntry{}
		r.start++
	}
	if r.start > 1024 && r.start > len(r.ring)/2 {
		r.ring = append(r.ring[:0:0], r.ring[r.start:]...)
		r.start = 0
	}
	close(r.changed)
	r.changed = make(chan struct{})
	if w.all {
		r.wakeAllLocked()
	} else {
		r.giveLocked(w.turns)
	}
}

// decodeLocked turns an entry recorded undecoded (a submit's or a batch's
// raw result) into its events, once. mu held.
func (r *Recorder) decodeLocked(ent *ringEntry) {
	if ent.raw == nil {
		return
	}
	if res, err := fsm.DecodeResultWithoutPayloads(ent.raw); err == nil {
		ent.events, _ = r.events(fsm.Entry{Index: ent.index, Time: ent.at}, &res)
	}
	ent.raw = nil
}

// Fence registers a worker runner's fence on job id's lease token: end is
// called (on the apply goroutine; it must not block) when an event at an
// index above token ends the job's current lease or the job itself. The
// returned func removes it.
func (r *Recorder) Fence(id string, token uint64, end func(Event)) func() {
	f := &fence{token: token, end: end}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.fences[id]
	if m == nil {
		m = map[*fence]struct{}{}
		r.fences[id] = m
	}
	m[f] = struct{}{}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.fences[id], f)
		if len(r.fences[id]) == 0 {
			delete(r.fences, id)
		}
	}
}

// Finished registers a wait for job id to finish: done is closed once an
// entry applied after the call leaves the job terminal (succeeded, dead or
// canceled), or the state is restored from a snapshot (the job may have
// finished in it); the caller reads the job then. stop removes the
// registration (after done is closed it does nothing). Finished keeps no
// history: it costs one map entry per waiting job; a batch of lease
// commands that touches a waited job is read for the job's state without
// being decoded, other entries that touch one are decoded as they apply.
func (r *Recorder) Finished(id string) (done <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.finished[id] = append(r.finished[id], ch)
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		chs := r.finished[id]
		if i := slices.Index(chs, ch); i >= 0 {
			chs = slices.Delete(chs, i, i+1)
		}
		if len(chs) == 0 {
			delete(r.finished, id)
		} else {
			r.finished[id] = chs
		}
	}
}

// Waiting is the number of jobs Finished waits are registered for.
func (r *Recorder) Waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.finished)
}

// Since returns the retained events at indexes >= from (at most max
// entries), the channel closed at the next append, and whether from is
// below the retained history (compacted) with the oldest retained index.
func (r *Recorder) Since(from uint64, max int) (evs []Event, next uint64, changed <-chan struct{}, oldest uint64, compacted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from < r.oldest {
		return nil, from, r.changed, r.oldest, true
	}
	live := r.ring[r.start:]
	i := sort.Search(len(live), func(i int) bool { return live[i].index >= from })
	next = from
	for n := 0; i < len(live) && n < max; i, n = i+1, n+1 {
		r.decodeLocked(&live[i])
		evs = append(evs, live[i].events...)
		next = live[i].index + 1
	}
	if i == len(live) && r.last+1 > next {
		next = r.last + 1
	}
	return evs, next, r.changed, r.oldest, false
}

// LeaseEnd returns the kind of the first recorded event after index token
// that ended job id's lease of that token: acked, naked, termed, canceled or
// expired (a lease ends before the job can be claimed again, so the first
// such event is the one that ended it), and for a nak or term its request
// sum (fsm.LeaseEnd.Sum; 0 if not recorded). ok is false when the retained
// history does not reach back to token+1 (compacted, or restarted by a
// snapshot restore) or shows no end up to the last recorded index.
func (r *Recorder) LeaseEnd(id string, token uint64) (kind EventKind, sum uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.oldest > token+1 {
		return "", 0, false
	}
	live := r.ring[r.start:]
	// An undecoded (raw) submit ends no lease; an undecoded batch may,
	// when it touches the job (read without decoding it first).
	for i := sort.Search(len(live), func(i int) bool { return live[i].index > token }); i < len(live); i++ {
		if t, _, _ := fsm.ResultHead(live[i].raw); t == fsm.CmdBatch || fsm.Batchable(t) {
			touches := false
			if _, ok := fsm.ScanBatch(live[i].raw, func(j string) bool { touches = j == id; return !touches }); ok && !touches {
				continue
			}
			r.decodeLocked(&live[i])
		}
		for _, ev := range live[i].events {
			if ev.JobID != id {
				continue
			}
			switch ev.Kind {
			case EventAcked, EventNaked, EventTermed, EventCanceled, EventExpired:
				return ev.Kind, ev.sum, true
			}
		}
	}
	return "", 0, false
}

// Bounds returns the oldest index Watch can start from and the last
// recorded index.
func (r *Recorder) Bounds() (oldest, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.oldest, r.last
}

// Snapshot is the state's snapshot (fsm.Jobs.Snapshot).
func (r *Recorder) Snapshot() (raft.Snapshot, error) { return r.jobs.Snapshot() }

// Restore replaces the state; the event history restarts after the
// restored index (events before it are not retained).
func (r *Recorder) Restore(rd io.Reader) error {
	if err := r.jobs.Restore(rd); err != nil {
		return err
	}
	idx := r.jobs.AppliedIndex()
	r.mu.Lock()
	r.ring, r.start, r.bytes = nil, 0, 0
	r.oldest, r.last = idx+1, idx
	close(r.changed)
	r.changed = make(chan struct{})
	r.wakeAllLocked()
	for id, chs := range r.finished {
		for _, ch := range chs {
			close(ch)
		}
		delete(r.finished, id)
	}
	r.mu.Unlock()
	return nil
}

// Digest is the state's digest (fsm.Jobs.Digest).
func (r *Recorder) Digest() raft.Digest { return raft.Digest(r.jobs.Digest()) }
