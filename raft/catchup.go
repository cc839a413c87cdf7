package raft

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/transport"
)

// The catch-up monitor: the leader's thin wiring around the catchup
// policy. On every tick (a quarter of the election timeout) the leader
// asks each member for its progress report (jr.progress), reads what its
// transport sent it (meter.go), feeds one catchup.Observation per member to
// its catchup.Tracker and acts on the decision: it promotes a candidate
// (AddVoter), and names a member that stalls or diverges (an event, the
// member's line in Status.Progress, metrics). The trackers live while this
// member leads one term; a new leader starts over, and an AddMember in
// flight is asked again of it (AddMember is idempotent).
type monitor struct {
	n      *Node
	policy catchup.Policy

	mu      sync.Mutex
	term    uint64
	members map[string]*tracked
}

// tracked is one member's state in the monitor.
type tracked struct {
	tr        *catchup.Tracker
	candidate bool
	waiters   []chan error
	prog      MemberProgress
	entries   catchup.Rate
	bytes     catchup.Rate
	last      catchup.Decision
}

// rateWindow is what the stream rates are smoothed over.
const rateWindow = time.Second

func newTracked(p catchup.Policy, candidate bool) *tracked {
	return &tracked{tr: catchup.NewTracker(p), candidate: candidate,
		entries: catchup.Rate{Window: rateWindow}, bytes: catchup.Rate{Window: rateWindow}}
}

func newMonitor(n *Node) *monitor {
	p := n.cfg.CatchUp
	if p.ElectionTimeout <= 0 {
		p.ElectionTimeout = n.cfg.ElectionTimeout
	}
	if p.NearLag == 0 {
		p.NearLag = uint64(n.cfg.MaxAppendEntries) // one append in flight
	}
	p = p.WithDefaults()
	n.meter.throttle.Store(catchup.NewThrottle(p.MaxStreamBytesPerSecond))
	return &monitor{n: n, policy: p, members: map[string]*tracked{}}
}

// run ticks until Close.
func (m *monitor) run() {
	m.n.wg.Add(1)
	go func() {
		defer m.n.wg.Done()
		tick := time.NewTicker(max(m.policy.ElectionTimeout/4, 5*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-m.n.closed:
				m.reset(ErrClosed)
				return
			case <-tick.C:
				m.tick()
			}
		}
	}()
}

// reset drops every tracker; waiting AddMember calls get err.
func (m *monitor) reset(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resetLocked(err)
}

func (m *monitor) resetLocked(err error) {
	for _, t := range m.members {
		t.notify(err)
	}
	m.members = map[string]*tracked{}
}

func (t *tracked) notify(err error) {
	for _, ch := range t.waiters {
		ch <- err
	}
	t.waiters = nil
}

// candidate marks id a candidate for promotion and returns the channel its
// outcome is sent on: nil once promoted, else why not. A candidate whose
// add gave up (stalled, diverged) starts over.
func (m *monitor) candidate(id string) (<-chan error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n.r.State() != hraft.Leader {
		return nil, ErrNotLeader
	}
	if term := m.n.r.CurrentTerm(); term != m.term {
		m.resetLocked(ErrNotLeader)
		m.term = term
	}
	t := m.members[id]
	if t == nil || !t.candidate || t.last.Action == catchup.Stalled || t.last.Action == catchup.Diverged {
		old := t
		t = newTracked(m.policy, true)
		if old != nil {
			t.waiters = old.waiters
		}
		m.members[id] = t
	}
	ch := make(chan error, 1)
	t.waiters = append(t.waiters, ch)
	return ch, nil
}

// progress returns the members' lines, sorted by ID, or nil when this
// member does not lead.
func (m *monitor) progress() []MemberProgress {
	if m.n.r.State() != hraft.Leader {
		return nil
	}
	out := []MemberProgress{m.n.selfProgress()}
	m.mu.Lock()
	for _, t := range m.members {
		if t.prog.ID != "" {
			out = append(out, t.prog)
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// tick observes every member once and acts.
func (m *monitor) tick() {
	r := m.n.r
	if r.State() != hraft.Leader {
		m.mu.Lock()
		if len(m.members) > 0 {
			m.resetLocked(ErrNotLeader)
		}
		m.mu.Unlock()
		return
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var servers []hraft.Server
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != m.n.cfg.ID {
			servers = append(servers, s)
		}
	}
	reports := make([]*progressReport, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(transport.ExpectPeer(m.n.life, string(s.ID)), m.policy.ElectionTimeout)
			defer cancel()
			if rep, err := m.n.progressOf(ctx, string(s.Address)); err == nil {
				reports[i] = &rep
			}
		}()
	}
	wg.Wait()
	now := time.Now()
	leaderLast, commit := r.LastIndex(), r.CommitIndex()
	var promote []hraft.Server

	m.mu.Lock()
	if term := r.CurrentTerm(); term != m.term {
		m.resetLocked(ErrNotLeader)
		m.term = term
	}
	seen := map[string]bool{}
	for i, s := range servers {
		id := string(s.ID)
		seen[id] = true
		t := m.members[id]
		if t == nil {
			t = newTracked(m.policy, false)
			m.members[id] = t
		}
		voter := s.Suffrage == hraft.Voter
		if voter && t.candidate {
			t.candidate = false
			t.notify(nil)
		}
		o := m.observation(id, voter && !t.candidate, t.candidate, leaderLast, commit, reports[i])
		d := t.tr.Decide(now, o)
		m.update(t, s, o, reports[i], d, now)
		if t.candidate && d.Action == catchup.Promote {
			promote = append(promote, s)
		}
	}
	for id, t := range m.members {
		if !seen[id] && t.prog.ID != "" { // removed from the configuration
			t.notify(fmt.Errorf("raft: member %q was removed before it was promoted", id))
			delete(m.members, id)
		}
	}
	m.mu.Unlock()

	for _, s := range promote {
		m.promote(s)
	}
}

// observation builds the policy's input for one member.
func (m *monitor) observation(id string, voter, candidate bool, leaderLast, commit uint64, rep *progressReport) catchup.Observation {
	o := catchup.Observation{Voter: voter, Candidate: candidate, LeaderLast: leaderLast, LeaderCommit: commit}
	if rep != nil {
		o.Reached = true
		o.LastIndex, o.LastTerm, o.Commit, o.Applied = rep.LastIndex, rep.LastTerm, rep.CommitIndex, rep.AppliedIndex
		o.PersistedFloor, o.GuardRefusals = rep.PersistedFloor, rep.GuardRefusals
		if d := rep.Diverged; d != nil {
			o.Diverged = &catchup.Divergence{Index: d.Index, LocalTerm: d.LocalTerm, LeaderTerm: d.LeaderTerm}
		}
	}
	p := m.n.meter.peer(hraft.ServerID(id))
	o.Installing = p.installing.Load()
	if o.Installing {
		size := p.installSize.Load()
		o.InstallRemaining = size - min(size, p.installRead.Load())
	}
	o.InstallBytes = p.installBytes.Load()
	o.InstallFailures = p.installFailures.Load()
	return o
}

// update refreshes the member's progress line, and reports a change of
// state (event, log line, metrics).
func (m *monitor) update(t *tracked, s hraft.Server, o catchup.Observation, rep *progressReport, d catchup.Decision, now time.Time) {
	id := string(s.ID)
	p := m.n.meter.peer(s.ID)
	prev := t.prog
	g := MemberProgress{ID: id, Address: string(s.Address), Voter: s.Suffrage == hraft.Voter, Candidate: t.candidate,
		Round: d.Round, RoundTarget: d.Target, Reason: string(d.Reason), Detail: d.Detail,
		LastIndex: prev.LastIndex, AppliedIndex: prev.AppliedIndex, LastContact: prev.LastContact, Role: prev.Role}
	if rep != nil {
		g.Role, g.LastIndex, g.AppliedIndex, g.LastContact = rep.Role, rep.LastIndex, rep.AppliedIndex, now
		g.EntriesPerSecond = t.entries.Observe(now, rep.LastIndex)
	} else {
		g.EntriesPerSecond = t.entries.Per()
	}
	if o.LeaderLast > g.LastIndex {
		g.Lag = o.LeaderLast - g.LastIndex
	}
	sent := p.bytes.Load() + p.installBytes.Load()
	g.BytesPerSecond = t.bytes.Observe(now, sent)
	g.SnapshotBytesSent = p.installBytes.Load()
	g.ETA = catchup.ETA(g.Lag, g.EntriesPerSecond)
	if o.Installing {
		g.Installing, g.SnapshotSize = true, p.installSize.Load()
		g.SnapshotBytesRemaining = g.SnapshotSize - min(g.SnapshotSize, p.installRead.Load())
		g.ETA = catchup.ETA(g.SnapshotBytesRemaining, g.BytesPerSecond)
	}
	switch d.Action {
	case catchup.Promote, catchup.Wait:
		g.State = StateCatchingUp
	case catchup.CaughtUp:
		g.State = StateCaughtUp
	case catchup.Stalled:
		g.State = StateStalled
	case catchup.Diverged:
		g.State, g.Divergence = StateDiverged, d.Divergence
	}
	t.prog, t.last = g, d
	// Appends to a non-voter not caught up are throttled (meter.go);
	// never a voter's: it may be needed for the quorum.
	p.catching.Store(!g.Voter && g.State != StateCaughtUp)
	m.emit(g)
	if g.State == prev.State && g.Reason == prev.Reason {
		return
	}
	switch g.State {
	case StateStalled:
		err := fmt.Errorf("%w: %s (%s)", ErrStalled, g.Reason, g.Detail)
		m.n.cfg.Logger.Warn("member does not converge", "member", id, "reason", g.Reason, "detail", g.Detail,
			"candidate", t.candidate, "last_index", g.LastIndex, "lag", g.Lag)
		metrics.IncrCounterWithLabels([]string{"jobraft", "catchup", "stalled_total"}, 1, []metrics.Label{{Name: "reason", Value: g.Reason}})
		m.n.events.publish(Event{Kind: EventMemberStalled, Member: Member{ID: id, Address: g.Address, Voter: g.Voter}, Progress: &g, Err: err})
		if t.candidate {
			t.notify(err)
		}
	case StateDiverged:
		err := fmt.Errorf("%w: %s", ErrMemberDiverged, g.Detail)
		m.n.cfg.Logger.Error("member diverged: never promoted, never repaired in place; re-seed it", "member", id,
			"index", d.Divergence.Index, "local_term", d.Divergence.LocalTerm, "leader_term", d.Divergence.LeaderTerm)
		m.n.events.publish(Event{Kind: EventMemberDiverged, Member: Member{ID: id, Address: g.Address, Voter: g.Voter},
			Index: d.Divergence.Index, Term: d.Divergence.LeaderTerm, Progress: &g, Err: err})
		if t.candidate {
			t.notify(err)
		}
	}
}

// promote adds a candidate as a voter.
func (m *monitor) promote(s hraft.Server) {
	ctx, cancel := context.WithTimeout(m.n.life, m.n.cfg.ApplyTimeout)
	defer cancel()
	err := waitFuture(ctx, m.n.r.AddVoter(s.ID, s.Address, 0, m.n.cfg.ApplyTimeout))
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.members[string(s.ID)]
	if err != nil {
		m.n.cfg.Logger.Warn("promotion failed; the policy decides again", "member", s.ID, "error", err)
		return
	}
	metrics.IncrCounter([]string{"jobraft", "catchup", "promoted_total"}, 1)
	if t == nil {
		return
	}
	g := t.prog
	g.Voter, g.Candidate = true, false
	t.prog, t.candidate = g, false
	m.n.cfg.Logger.Info("member promoted to voter", "member", s.ID, "round", t.last.Round, "round_took", t.last.RoundTook)
	m.n.events.publish(Event{Kind: EventMemberPromoted, Member: Member{ID: g.ID, Address: g.Address, Voter: true}, Progress: &g})
	t.notify(nil)
}

// emit sets the member's catch-up gauges.
func (m *monitor) emit(g MemberProgress) {
	l := []metrics.Label{{Name: "member", Value: g.ID}}
	b := func(v bool) float32 {
		if v {
			return 1
		}
		return 0
	}
	metrics.SetGaugeWithLabels([]string{"jobraft", "catchup", "lag_entries"}, float32(g.Lag), l)
	metrics.SetGaugeWithLabels([]string{"jobraft", "catchup", "stalled"}, b(g.State == StateStalled), l)
	metrics.SetGaugeWithLabels([]string{"jobraft", "catchup", "member_diverged"}, b(g.State == StateDiverged), l)
	metrics.SetGaugeWithLabels([]string{"jobraft", "catchup", "entries_per_second"}, float32(g.EntriesPerSecond), l)
	metrics.SetGaugeWithLabels([]string{"jobraft", "catchup", "bytes_per_second"}, float32(g.BytesPerSecond), l)
	metrics.SetGaugeWithLabels([]string{"jobraft", "catchup", "eta_seconds"}, float32(g.ETA.Seconds()), l)
}

// waitPromotion waits for a candidate's outcome.
func (n *Node) waitPromotion(ctx context.Context, id string, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("raft: %s not promoted yet: %w", id, ctx.Err())
	case <-n.closed:
		return ErrClosed
	}
}

// isNotLeader reports whether err means the leadership moved.
func isNotLeader(err error) bool { return errors.Is(err, ErrNotLeader) }
