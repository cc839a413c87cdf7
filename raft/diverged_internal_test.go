package raft

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/wal"
)

// The decision, over the refusals the guard can make and the views a
// member can have: only a refused suffix truncation at the floor, asked by
// a leader of a higher term while following it, is a divergence.
func TestDivergedBy(t *testing.T) {
	// Log [1,14], floor 14, the leader asks to cut [14,14].
	suffix := func() *wal.GuardError {
		return &wal.GuardError{Op: wal.OpDelete, Err: wal.ErrCommittedTruncate, First: 1, Last: 14, LastTerm: 2, Floor: 14, Min: 14, Max: 14}
	}
	follower := refusalView{Follower: true, Self: "m0", Leader: "m1", LeaderTerm: 3, LocalTerm: 2}
	cases := []struct {
		name string
		ge   func(*wal.GuardError)
		v    func(*refusalView)
		want bool
	}{
		{"suffix at the floor, higher-term leader", nil, nil, true},
		{"suffix from below the floor through the tail", func(g *wal.GuardError) { g.Min, g.Max, g.Floor = 10, 20, 14 }, nil, true},
		{"range past the tail (raft's cached last)", func(g *wal.GuardError) { g.Max = 99 }, nil, true},
		{"compaction above the floor", func(g *wal.GuardError) { g.Min, g.Max = 1, 16; g.Last = 20 }, nil, false},
		{"not reaching the tail", func(g *wal.GuardError) { g.Min, g.Max, g.Last = 10, 12, 20 }, nil, false},
		{"above the floor", func(g *wal.GuardError) { g.Floor = 13 }, nil, false},
		{"invalid range", func(g *wal.GuardError) { g.Err = wal.ErrInvalidRange }, nil, false},
		{"a store refusal", func(g *wal.GuardError) { g.Op = wal.OpStore; g.Err = wal.ErrOverwrite }, nil, false},
		{"candidate", nil, func(v *refusalView) { v.Follower = false }, false},
		{"no leader known", nil, func(v *refusalView) { v.Leader = "" }, false},
		{"itself as leader", nil, func(v *refusalView) { v.Leader = "m0" }, false},
		{"leader of the same term", nil, func(v *refusalView) { v.LeaderTerm = 2 }, false},
		{"local term unknown", nil, func(v *refusalView) { v.LocalTerm = 0 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ge, v := suffix(), follower
			if tc.ge != nil {
				tc.ge(ge)
			}
			if tc.v != nil {
				tc.v(&v)
			}
			d, ok := divergedBy(ge, v)
			if ok != tc.want {
				t.Fatalf("divergedBy(%v, %+v) = %t, want %t", ge, v, ok, tc.want)
			}
			if ok && (d.Index != ge.Min || d.LocalTerm != v.LocalTerm || d.LeaderTerm != v.LeaderTerm || d.Leader != v.Leader || d.Floor != ge.Floor) {
				t.Fatalf("divergence %+v from %v, %+v", d, ge, v)
			}
		})
	}
}

// The state is set once, counts every refusal, and hands out copies.
func TestDivergenceRecordsOnce(t *testing.T) {
	d := newDivergence()
	if d.is() || d.current() != nil {
		t.Fatal("new state diverged")
	}
	t0 := time.Unix(100, 0)
	if _, first := d.record(Divergence{Index: 5, LocalTerm: 2, LeaderTerm: 3, Leader: "m1"}, t0); !first {
		t.Fatal("first record not first")
	}
	cur, first := d.record(Divergence{Index: 4, LocalTerm: 2, LeaderTerm: 4, Leader: "m2"}, t0.Add(time.Second))
	if first || !d.is() || cur.Index != 5 || cur.Leader != "m1" || !cur.Since.Equal(t0) || cur.Refusals != 2 {
		t.Fatalf("after two records: %+v first %t", cur, first)
	}
	c := d.current()
	c.Index = 99
	if d.current().Index != 5 {
		t.Fatal("current returned the state itself, not a copy")
	}
}

// One line per window, the first at once, then the count held back.
func TestRepeatLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	var buf bytes.Buffer
	base := hclog.New(&hclog.LoggerOptions{Name: "m0", Output: &buf, Level: hclog.Trace})
	lim := newRepeatLimiter(10*time.Second, func() time.Time { return now }, map[string]bool{"refused": true})
	lg := limitedLogger{Logger: base, lim: lim}.Named("wal")
	other := limitedLogger{Logger: base, lim: lim}.Named("raft")
	for i := 0; i < 5; i++ {
		lg.Error("refused", "i", i)
		now = now.Add(time.Second)
	}
	other.Error("refused", "i", 0) // another logger: its own window
	lg.Info("other line")
	lg.Info("other line")
	now = now.Add(5 * time.Second) // 10 s after the first
	lg.With("k", "v").Error("refused", "i", 5)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"[ERROR] m0.wal: refused: i=0",
		"[ERROR] m0.raft: refused: i=0",
		"[INFO]  m0.wal: other line",
		"[INFO]  m0.wal: other line",
		"[ERROR] m0.wal: refused: k=v i=5 repeats_held_back=4 window=10s",
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d: %q, want it to end with %q", i, lines[i], w)
		}
	}
}

// recordingTransport records the vote requests it is asked to send.
type recordingTransport struct {
	hraft.Transport // nil: any other call panics
	votes, preVotes int
	closed          bool
}

func (r *recordingTransport) RequestVote(_ hraft.ServerID, _ hraft.ServerAddress, args *hraft.RequestVoteRequest, resp *hraft.RequestVoteResponse) error {
	r.votes++
	resp.Term, resp.Granted = args.Term, true
	return nil
}

func (r *recordingTransport) RequestPreVote(_ hraft.ServerID, _ hraft.ServerAddress, args *hraft.RequestPreVoteRequest, resp *hraft.RequestPreVoteResponse) error {
	r.preVotes++
	resp.Term, resp.Granted = args.Term, true
	return nil
}

func (r *recordingTransport) Close() error { r.closed = true; return nil }

// A diverged member's own vote and pre-vote requests are denied locally,
// never sent, in the term asked (so raft counts a refusal, not a newer
// term); otherwise they pass through. The wrapper keeps pre-vote and Close.
func TestCampaignGate(t *testing.T) {
	inner := &recordingTransport{}
	diverged := false
	g := gateCampaigns(inner, func() bool { return diverged })
	pv, ok := g.(hraft.WithPreVote)
	if !ok {
		t.Fatal("gate over a pre-vote transport lost pre-vote")
	}
	var vr hraft.RequestVoteResponse
	var pr hraft.RequestPreVoteResponse
	if err := g.RequestVote("m1", "a", &hraft.RequestVoteRequest{Term: 7}, &vr); err != nil || !vr.Granted || inner.votes != 1 {
		t.Fatalf("healthy vote: %v %+v sent %d", err, vr, inner.votes)
	}
	if err := pv.RequestPreVote("m1", "a", &hraft.RequestPreVoteRequest{Term: 7}, &pr); err != nil || !pr.Granted || inner.preVotes != 1 {
		t.Fatalf("healthy pre-vote: %v %+v sent %d", err, pr, inner.preVotes)
	}
	diverged = true
	if err := g.RequestVote("m1", "a", &hraft.RequestVoteRequest{Term: 8}, &vr); err != nil || vr.Granted || vr.Term != 8 || inner.votes != 1 {
		t.Fatalf("diverged vote: %v %+v sent %d", err, vr, inner.votes)
	}
	if err := pv.RequestPreVote("m1", "a", &hraft.RequestPreVoteRequest{Term: 8}, &pr); err != nil || pr.Granted || pr.Term != 8 || inner.preVotes != 1 {
		t.Fatalf("diverged pre-vote: %v %+v sent %d", err, pr, inner.preVotes)
	}
	if err := g.(hraft.WithClose).Close(); err != nil || !inner.closed {
		t.Fatalf("close: %v, inner closed %t", err, inner.closed)
	}
	type plain struct{ hraft.Transport }
	if _, ok := gateCampaigns(plain{}, func() bool { return false }).(hraft.WithPreVote); ok {
		t.Fatal("gate over a transport without pre-vote claims pre-vote")
	}
}

// A diverged member creates no snapshot (taken or installed); a healthy
// one does.
func TestSnapshotGate(t *testing.T) {
	s, err := snapshot.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	diverged := true
	g := snapshotGate{Store: s, diverged: func() bool { return diverged }}
	conf := hraft.Configuration{Servers: []hraft.Server{{Suffrage: hraft.Voter, ID: "m0", Address: "a"}}}
	if _, err := g.Create(1, 10, 2, conf, 1, nil); !errors.Is(err, ErrDiverged) {
		t.Fatalf("create while diverged: %v, want ErrDiverged", err)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("a refused create left %d snapshots", len(l))
	}
	diverged = false
	sink, err := g.Create(1, 10, 2, conf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Cancel()
}

// An append carrying, at or below the floor, an entry of another and
// higher term than this member's own is a divergence even when raft could
// never ask to cut it (the entries before it compacted here: its lookup of
// the previous entry fails). Entries above the floor, equal ones, and a
// leader whose term is not above the local entry's are not.
func TestDivergentEntry(t *testing.T) {
	log := hraft.NewInmemStore()
	for i := uint64(5); i <= 20; i++ { // [1,4] compacted
		if err := log.StoreLog(&hraft.Log{Index: i, Term: 2, Type: hraft.LogCommand}); err != nil {
			t.Fatal(err)
		}
	}
	app := func(term uint64, from, to, entryTerm uint64) *hraft.AppendEntriesRequest {
		a := &hraft.AppendEntriesRequest{RPCHeader: hraft.RPCHeader{ID: []byte("m1")}, Term: term, PrevLogEntry: from - 1, PrevLogTerm: 1}
		for i := from; i <= to; i++ {
			a.Entries = append(a.Entries, &hraft.Log{Index: i, Term: entryTerm, Type: hraft.LogCommand})
		}
		return a
	}
	cases := []struct {
		name   string
		floor  uint64
		a      *hraft.AppendEntriesRequest
		want   bool
		wantAt uint64
	}{
		{"from the compacted prefix into the committed log", 18, app(3, 2, 9, 3), true, 5},
		{"inside the committed log", 18, app(3, 10, 12, 3), true, 10},
		{"above the floor", 9, app(3, 10, 12, 3), false, 0},
		{"the same entries again", 18, app(3, 6, 8, 2), false, 0},
		{"only the compacted prefix", 18, app(3, 1, 4, 3), false, 0},
		{"a leader whose term is not above ours", 18, app(2, 10, 12, 1), false, 0},
		{"no entries", 18, &hraft.AppendEntriesRequest{Term: 3}, false, 0},
	}
	for _, tc := range cases {
		d, ok := divergentEntry(log, tc.floor, tc.a)
		if ok != tc.want {
			t.Errorf("%s: divergentEntry = %+v, %t, want %t", tc.name, d, ok, tc.want)
			continue
		}
		if ok && (d.Index != tc.wantAt || d.LocalTerm != 2 || d.LeaderTerm != tc.a.Term || d.Leader != "m1" || d.Floor != tc.floor) {
			t.Errorf("%s: divergence %+v, want index %d", tc.name, d, tc.wantAt)
		}
	}

	// With a term index (the wal's), the compacted prefix answers too: the
	// log held term 2 from index 3 on, and knows terms from index 2.
	indexed := termIndexed{InmemStore: log, known: 2, starts: map[uint64]uint64{2: 1, 3: 2}}
	tcases := []struct {
		name   string
		a      *hraft.AppendEntriesRequest
		want   bool
		wantAt uint64
	}{
		{"only the compacted prefix, another term", app(3, 3, 4, 3), true, 3},
		{"only the compacted prefix, the same terms", app(3, 3, 4, 2), false, 0},
		{"a compacted index the term index does not know", app(3, 1, 1, 3), false, 0},
		{"the compacted prefix from a leader whose term is not above ours", app(2, 3, 4, 1), false, 0},
	}
	for _, tc := range tcases {
		d, ok := divergentEntry(indexed, 18, tc.a)
		if ok != tc.want || ok && (d.Index != tc.wantAt || d.LocalTerm != 2 || d.LeaderTerm != tc.a.Term || d.Floor != 18) {
			t.Errorf("term index, %s: divergentEntry = %+v, %t, want %t at %d", tc.name, d, ok, tc.want, tc.wantAt)
		}
	}
}

// termIndexed is an in-memory log with a term index for its compacted
// prefix: the term at each index from known on is that of the last start
// at or below it.
type termIndexed struct {
	*hraft.InmemStore
	known  uint64
	starts map[uint64]uint64 // start index -> term
}

func (l termIndexed) TermAt(index uint64) (uint64, bool) {
	if index < l.known {
		return 0, false
	}
	for i := index; i > 0; i-- {
		if term, ok := l.starts[i]; ok {
			return term, true
		}
	}
	return 0, false
}
