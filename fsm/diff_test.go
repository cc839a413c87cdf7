package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var baseTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// world drives random entries through the real state machine, a twin (a
// second instance, replaced by a restored copy at random points) and the
// reference model, checking they agree.
type world struct {
	t           *rapid.T
	real, twin  *Jobs
	ref         *model
	index, term uint64
	now         time.Time
	since       time.Time // current leader's LeaderSince
	finishes    []Command // the last acks, naks and terms generated, to repeat
	deps        bool      // draw dependencies and their parents' ends often (deps_model_test.go)
}

func newWorld(t *rapid.T) *world {
	return &world{t: t, real: New(), twin: New(), ref: newModel(), term: 1, now: baseTime, since: baseTime}
}

func (w *world) genID(t *rapid.T, allowEmpty bool) string {
	ids := []string{"j0", "j1", "j2", "j3", "j4", "j5"}
	for id := range w.ref.jobs {
		if id[0] == '@' {
			ids = append(ids, id)
		}
	}
	if allowEmpty {
		ids = append(ids, "", "", "")
	}
	return rapid.SampledFrom(ids).Draw(t, "id")
}

func (w *world) genToken(t *rapid.T, id string) uint64 {
	j, ok := w.ref.jobs[id]
	switch k := rapid.IntRange(0, 5).Draw(t, "tokgood"); {
	case ok && j.Lease != nil && k > 1:
		return j.Lease.Token
	case ok && j.LastLease != nil && k > 0:
		return j.LastLease.Token // a repeat, or a stale token
	}
	return rapid.Uint64Range(0, w.index+1).Draw(t, "token")
}

var queuesGen = rapid.SampledFrom([]string{"a", "b", "c", ""})

var kindsGen = rapid.SampledFrom([]string{"k", "k", "k2", "k3"})

// genKinds draws a claim's kinds: mostly none (any kind), else a few,
// duplicates, kinds no job has and the invalid empty kind included.
func genKinds(t *rapid.T) []string {
	if rapid.IntRange(0, 2).Draw(t, "anykind") > 0 {
		return nil
	}
	return rapid.SliceOfN(rapid.SampledFrom([]string{"k", "k2", "k3", "x", ""}), 1, 3).Draw(t, "kinds")
}

func (w *world) genCommand(t *rapid.T) Command {
	dur := func(label string) time.Duration {
		return time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(t, label))
	}
	switch rapid.IntRange(0, 21).Draw(t, "kind") {
	case 17, 18, 19:
		return genScheduleCmd(t)
	case 20, 21:
		return genLimitCmd(t)
	case 15, 16:
		if len(w.finishes) > 0 {
			return w.genRepeat(t)
		}
		return &SweepCmd{}
	case 14:
		// A batch of lease commands (some possibly invalid alone).
		n := rapid.IntRange(1, 4).Draw(t, "nbatch")
		b := &BatchCmd{}
		for len(b.Cmds) < n {
			if c := w.genCommand(t); Batchable(c.Type()) {
				b.Cmds = append(b.Cmds, c)
			}
		}
		return b
	case 0, 1, 2:
		n := rapid.IntRange(0, 4).Draw(t, "n")
		jobs := make([]NewJob, n)
		for i := range jobs {
			nj := NewJob{
				ID: w.genID(t, true), Queue: queuesGen.Draw(t, "queue"), Kind: kindsGen.Draw(t, "kind"),
				Payload:        []byte(rapid.StringN(0, 8, -1).Draw(t, "payload")),
				Priority:       int32(rapid.IntRange(-1, 2).Draw(t, "prio")),
				MaxAttempts:    uint32(rapid.IntRange(0, 3).Draw(t, "maxatt")),
				IdempotencyKey: rapid.SampledFrom([]string{"", "", "k0", "k1", "k2"}).Draw(t, "key"),
				Backoff: Backoff{Base: time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "bobase")),
					Jitter: uint8(rapid.IntRange(0, 101).Draw(t, "jitter"))},
			}
			if rapid.IntRange(0, 2).Draw(t, "unique") == 0 {
				nj.Unique = genUnique(t)
				nj.Payload = []byte(rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "upayload"))
			}
			if rapid.Bool().Draw(t, "delayed") {
				nj.RunAt = w.now.Add(time.Duration(rapid.Int64Range(-int64(5*time.Second), int64(10*time.Second)).Draw(t, "runat")))
			}
			w.genParents(t, &nj)
			jobs[i] = nj
		}
		return &SubmitCmd{Jobs: jobs, Batch: w.genBatch(t)}
	case 3, 4:
		n := rapid.IntRange(0, 3).Draw(t, "nq")
		qs := make([]string, n)
		for i := range qs {
			qs[i] = queuesGen.Draw(t, "cq")
		}
		return &ClaimCmd{Queues: qs, Worker: rapid.SampledFrom([]string{"w1", "w2", ""}).Draw(t, "worker"),
			Max: uint32(rapid.IntRange(0, 3).Draw(t, "max")), TTL: dur("ttl"), Kinds: genKinds(t),
			ID: rapid.SampledFrom([]string{"", "", "c1", "c2"}).Draw(t, "claimid")}
	case 5:
		id := w.genID(t, false)
		return &ExtendCmd{ID: id, Token: w.genToken(t, id), TTL: dur("ttl")}
	case 6:
		id := w.genID(t, false)
		// Few results, delays and reasons: a finish repeated under a
		// token that ended is often the same request, often not.
		return &AckCmd{ID: id, Token: w.genToken(t, id), Result: []byte(rapid.SampledFrom([]string{"", "a", "b", "ab"}).Draw(t, "res"))}
	case 7:
		id := w.genID(t, false)
		delay := rapid.SampledFrom([]time.Duration{0, time.Nanosecond, time.Second, -1}).Draw(t, "delay")
		if delay < 0 {
			delay = dur("anydelay")
		}
		return &NakCmd{ID: id, Token: w.genToken(t, id), Delay: delay, Error: rapid.SampledFrom([]string{"", "boom"}).Draw(t, "err")}
	case 8:
		id := w.genID(t, false)
		return &TermCmd{ID: id, Token: w.genToken(t, id), Reason: rapid.SampledFrom([]string{"bad", "worse", ""}).Draw(t, "reason")}
	case 9:
		return &CancelCmd{ID: w.genID(t, false), Reason: rapid.SampledFrom([]string{"", "stop"}).Draw(t, "reason")}
	case 10:
		return &RetryCmd{ID: w.genID(t, false)}
	case 11:
		since := w.since
		if rapid.IntRange(0, 9).Draw(t, "zerosince") == 0 {
			since = time.Time{}
		}
		// Mostly proposed for the current term; sometimes unchecked (0) or
		// for a term the entry is not appended in (refused).
		term := rapid.SampledFrom([]uint64{w.term, w.term, w.term, 0, w.term + 1, w.term - 1}).Draw(t, "expireterm")
		return &ExpireCmd{LeaderSince: since, Term: term}
	case 12:
		q := queuesGen.Draw(t, "pq")
		if rapid.Bool().Draw(t, "pause") {
			return &PauseCmd{Queue: q}
		}
		return &ResumeCmd{Queue: q}
	default:
		return &SweepCmd{MaxAge: dur("maxage"), MaxPerQueue: uint32(rapid.IntRange(0, 3).Draw(t, "maxper"))}
	}
}

// finished remembers c, an ack, nak or term that ended a lease, for
// genRepeat.
func (w *world) finished(c Command) {
	if w.finishes = append(w.finishes, c); len(w.finishes) > 8 {
		w.finishes = w.finishes[1:]
	}
}

// genRepeat draws one of the last finishes sent again: as it was (a
// client's retry), or another request under its token: one field changed,
// or another kind of finish.
func (w *world) genRepeat(t *rapid.T) Command {
	c := rapid.SampledFrom(w.finishes).Draw(t, "again")
	var id string
	var tok uint64
	switch c := c.(type) {
	case *AckCmd:
		id, tok = c.ID, c.Token
	case *NakCmd:
		id, tok = c.ID, c.Token
	case *TermCmd:
		id, tok = c.ID, c.Token
	}
	switch rapid.IntRange(0, 5).Draw(t, "change") {
	case 0, 1, 2:
		return c
	case 3:
		switch c := c.(type) {
		case *AckCmd:
			return &AckCmd{ID: id, Token: tok, Result: append([]byte("x"), c.Result...)}
		case *NakCmd:
			if rapid.Bool().Draw(t, "changedelay") {
				return &NakCmd{ID: id, Token: tok, Delay: c.Delay + time.Second, Error: c.Error}
			}
			return &NakCmd{ID: id, Token: tok, Delay: c.Delay, Error: c.Error + "x"}
		case *TermCmd:
			return &TermCmd{ID: id, Token: tok, Reason: c.Reason + "x"}
		}
	case 4:
		return &AckCmd{ID: id, Token: tok}
	}
	return &NakCmd{ID: id, Token: tok}
}

func (w *world) step(t *rapid.T) {
	// Time mostly moves forward, sometimes back (a new leader's skewed clock).
	w.now = w.now.Add(time.Duration(rapid.Int64Range(-int64(time.Second), int64(8*time.Second)).Draw(t, "dt")))
	if rapid.IntRange(0, 15).Draw(t, "election") == 0 {
		w.term++
		w.since = w.now
	}
	var cmd []byte
	var c Command
	if rapid.IntRange(0, 30).Draw(t, "garbage") == 0 {
		cmd = rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "bytes")
	} else {
		c = w.gen(t)
		cmd = appendCommand(nil, c)
	}
	w.index += uint64(rapid.IntRange(1, 2).Draw(t, "di"))
	e := Entry{Index: w.index, Term: w.term, Time: w.now, Cmd: cmd}
	got := w.real.Apply(e)
	twinGot := w.twin.Apply(e)
	if !bytes.Equal(got, twinGot) {
		t.Fatalf("entry %d: twin result differs", e.Index)
	}
	res, err := DecodeResult(got)
	if err != nil {
		t.Fatalf("entry %d: decode result: %v", e.Index, err)
	}
	want := w.ref.apply(e)
	stripDetail(&res)
	stripDetail(&want)
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("entry %d (%x): result mismatch\n got %+v\nwant %+v", e.Index, cmd, res, want)
	}
	if c != nil && Batchable(c.Type()) && c.Type() != CmdClaim && c.Type() != CmdExtend && res.Err() == nil && res.Changed {
		w.finished(c)
	}
	if w.real.Digest() != w.twin.Digest() {
		t.Fatalf("entry %d: digests differ between instances", e.Index)
	}
}

func stripDetail(r *Result) {
	r.Detail = ""
	for i := range r.Submitted {
		r.Submitted[i].Detail = ""
	}
	if len(r.Submitted) == 0 {
		r.Submitted = nil
	}
	if len(r.Jobs) == 0 {
		r.Jobs = nil
	}
	if len(r.Expired) == 0 {
		r.Expired = nil
	}
	for i := range r.Batch {
		stripDetail(&r.Batch[i])
	}
	if len(r.Batch) == 0 {
		r.Batch = nil
	}
	if len(r.Cascade) == 0 {
		r.Cascade = nil
	}
	if len(r.Completed) == 0 {
		r.Completed = nil
	}
	if len(r.Fired) == 0 {
		r.Fired = nil
	}
}

// checkQueries compares every query of the real machine with the model.
func (w *world) checkQueries(t *rapid.T) {
	if got := w.real.AppliedIndex(); got != w.ref.index {
		t.Fatalf("applied index %d, model %d", got, w.ref.index)
	}
	if w.real.Len() != len(w.ref.jobs) {
		t.Fatalf("len %d, model %d", w.real.Len(), len(w.ref.jobs))
	}
	for id, mj := range w.ref.jobs {
		j, ok := w.real.Get(id)
		if !ok || !reflect.DeepEqual(j, *mj) {
			t.Fatalf("Get(%q) = %+v %v, model %+v", id, j, ok, *mj)
		}
	}
	if _, ok := w.real.Get("missing"); ok {
		t.Fatalf("Get(missing) found")
	}
	w.checkBatches(t)
	var wantQ []QueueInfo
	for _, q := range w.ref.queueNames() {
		wantQ = append(wantQ, QueueInfo{Name: q, Paused: w.ref.paused[q], Counts: w.ref.counts(q), Kinds: w.ref.kinds(q)})
	}
	if got := w.real.Queues(); !reflect.DeepEqual(got, wantQ) {
		t.Fatalf("Queues() = %+v, model %+v", got, wantQ)
	}
	for range 3 {
		qs := rapid.SliceOfN(queuesGen, 0, 3).Draw(t, "claimableq")
		kinds := genKinds(t)
		if got, want := w.real.Claimable(qs, kinds, w.now), w.ref.claimable(qs, kinds, w.now); got != want {
			t.Fatalf("Claimable(%q, %q, %v) = %v, model %v", qs, kinds, w.now, got, want)
		}
	}
	wantDue := false
	for _, j := range w.ref.jobs {
		wantDue = wantDue || (j.State == StateRunning && !j.Lease.Deadline.After(w.ref.clk.at(w.now)))
	}
	if got, want := w.real.Limits(w.now), w.ref.queueLimits(w.now); !reflect.DeepEqual(got, want) {
		t.Fatalf("Limits(%v) = %+v, model %+v", w.now, got, want)
	}
	if got := w.real.LeaseDue(w.now); got != wantDue {
		t.Fatalf("LeaseDue(%v) = %v, model %v", w.now, got, wantDue)
	}
	age := time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(t, "sweepage"))
	per := uint32(rapid.IntRange(0, 3).Draw(t, "sweepper"))
	probe := w.ref.clone()
	probe.index = w.index + 1
	want := probe.apply(Entry{Index: w.index + 1, Term: w.term, Time: w.now, Cmd: appendCommand(nil, &SweepCmd{MaxAge: age, MaxPerQueue: per})}).Removed > 0
	if got := w.real.Sweepable(age, per, w.now); got != want {
		t.Fatalf("Sweepable(%v, %d, %v) = %v, model's sweep removes some: %v", age, per, w.now, got, want)
	}
	w.checkSchedules(t)
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	for _, q := range []string{"a", "b", "c"} {
		for s := StatePending; s < numStates; s++ {
			var got []Job
			cursor := ""
			for pages := 0; ; pages++ {
				p, err := w.real.List(ListQuery{Queue: q, State: s, Cursor: cursor, Limit: limit})
				if err != nil || pages > 100 {
					t.Fatalf("List: %v (pages %d)", err, pages)
				}
				got = append(got, p.Jobs...)
				if p.Next == "" {
					break
				}
				cursor = p.Next
			}
			var want []Job
			for _, j := range w.ref.selectJobs(q, s) {
				want = append(want, *j)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("List(%s, %s) = %+v\nmodel %+v", q, s, got, want)
			}
		}
	}
}

// snapshotRestore snapshots the real machine, applies a few more entries,
// then persists (the snapshot must still describe its own index) and
// restores into a new twin, which must carry the snapshot's digest.
func (w *world) snapshotRestore(t *rapid.T) {
	snap, err := w.real.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	at := w.real.Digest()
	refAt := w.ref.clone()
	for i := rapid.IntRange(0, 3).Draw(t, "extra"); i > 0; i-- {
		w.step(t)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	restored := New()
	if err := restored.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := restored.Digest(); got != at {
		t.Fatalf("restored digest %x@%d, snapshot taken at %x@%d", got.Sum, got.Index, at.Sum, at.Index)
	}
	if restored.Len() != len(refAt.jobs) {
		t.Fatalf("restored %d jobs, model had %d", restored.Len(), len(refAt.jobs))
	}
	// Catch the restored copy up by replaying on a fresh snapshot of now.
	snap2, _ := w.real.Snapshot()
	buf.Reset()
	if err := snap2.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	w.twin = New()
	if err := w.twin.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if w.twin.Digest() != w.real.Digest() {
		t.Fatalf("twin digest differs after restore")
	}
}

func TestDifferential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t)
		steps := rapid.IntRange(1, 120).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			w.step(t)
			if rapid.IntRange(0, 4).Draw(t, "check") == 0 || i == steps-1 {
				w.checkQueries(t)
			}
			if rapid.IntRange(0, 20).Draw(t, "snap") == 0 {
				w.snapshotRestore(t)
			}
		}
	})
}

func ExampleEncodeCommand() {
	b, _ := EncodeCommand(SubmitCmd{Jobs: []NewJob{{ID: "mail-1", Queue: "default", Kind: "email"}}})
	m := New()
	r, _ := DecodeResult(m.Apply(Entry{Index: 1, Term: 1, Time: baseTime, Cmd: b}))
	fmt.Println(r.Submitted[0].Outcome, r.Submitted[0].Job.ID, r.Submitted[0].Job.State)
	// Output: created mail-1 pending
}
