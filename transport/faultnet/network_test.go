package faultnet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/transport"
)

// inmemPair returns wrapped in-memory transports a and b, connected, and
// starts b answering every RPC with a fixed response.
func inmemPair(t *testing.T, n *Network) (a, b raft.Transport) {
	t.Helper()
	aAddr, ai := raft.NewInmemTransport("a")
	bAddr, bi := raft.NewInmemTransport("b")
	a, b = n.Wrap(aAddr, ai), n.Wrap(bAddr, bi)
	a.(raft.WithPeers).Connect(bAddr, b)
	b.(raft.WithPeers).Connect(aAddr, a)
	done := make(chan struct{})
	t.Cleanup(func() { close(done); _ = a.(raft.WithClose).Close(); _ = b.(raft.WithClose).Close() })
	go func() {
		for {
			select {
			case rpc := <-b.Consumer():
				switch rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					rpc.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Term: 5, Granted: true}, nil)
				default:
					rpc.Respond(nil, errors.New("unexpected"))
				}
			case <-done:
				return
			}
		}
	}()
	return a, b
}

func TestWrapKeepsCapabilities(t *testing.T) {
	n := New(1)
	_, inmem := raft.NewInmemTransport("x")
	w := n.Wrap("x", inmem)
	if _, ok := w.(raft.LoopbackTransport); !ok {
		t.Fatal("wrapped InmemTransport is not a LoopbackTransport (pre-vote, peers, close)")
	}
	type bare struct{ raft.Transport } // hides every optional ability
	w = n.Wrap("x", bare{inmem})
	if _, ok := w.(raft.WithPreVote); ok {
		t.Fatal("wrapper claims pre-vote its inner transport lacks")
	}
	if _, ok := w.(raft.WithPeers); ok {
		t.Fatal("wrapper claims peers its inner transport lacks")
	}
	if _, ok := w.(raft.WithClose); !ok {
		t.Fatal("wrapper must always implement WithClose")
	}
	type preVoteOnly struct {
		raft.Transport
		raft.WithPreVote
	}
	w = n.Wrap("x", preVoteOnly{inmem, inmem})
	if _, ok := w.(raft.WithPreVote); !ok {
		t.Fatal("wrapper dropped the inner transport's pre-vote")
	}
}

func TestFaultTransportRules(t *testing.T) {
	n := New(7)
	a, _ := inmemPair(t, n)
	ae := func() error {
		var resp raft.AppendEntriesResponse
		return a.AppendEntries("b", "b", &raft.AppendEntriesRequest{Term: 5, RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a")}}, &resp)
	}
	pv := func() error {
		var resp raft.RequestPreVoteResponse
		return a.(raft.WithPreVote).RequestPreVote("b", "b", &raft.RequestPreVoteRequest{Term: 5}, &resp)
	}
	if err := ae(); err != nil {
		t.Fatal(err)
	}
	if err := pv(); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		rule    func()
		wantErr bool
		counter func(Counts) uint64
	}{
		{"cut a->b refuses", func() { n.Cut("a", "b") }, true, func(c Counts) uint64 { return c.Refused }},
		{"cut b->a loses responses", func() { n.Heal(); n.Cut("b", "a") }, true, func(c Counts) uint64 { return c.Lost }},
		{"partition", func() { n.Heal(); n.Partition("b", "a") }, true, func(c Counts) uint64 { return c.Refused }},
		{"isolate", func() { n.Heal(); n.Isolate("b") }, true, func(c Counts) uint64 { return c.Refused }},
		{"rejoin", func() { n.Rejoin("b") }, false, nil},
		{"drop all", func() { n.SetDrop(1) }, true, func(c Counts) uint64 { return c.Refused }},
		{"heal", func() { n.Heal() }, false, nil},
	}
	for _, s := range steps {
		s.rule()
		before := n.Stats()[KindAppendEntries]
		err := ae()
		if (err != nil) != s.wantErr || (err != nil && !errors.Is(err, ErrInjected)) {
			t.Fatalf("%s: AppendEntries err %v", s.name, err)
		}
		if err := pv(); (err != nil) != s.wantErr {
			t.Fatalf("%s: RequestPreVote err %v", s.name, err)
		}
		if s.counter != nil && s.counter(n.Stats()[KindAppendEntries]) != s.counter(before)+1 {
			t.Fatalf("%s: counter did not move: %+v -> %+v", s.name, before, n.Stats()[KindAppendEntries])
		}
	}

	// Delay.
	n.SetDelay(30*time.Millisecond, 0)
	start := time.Now()
	if err := ae(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("request+response delay of 2x30ms took %v", d)
	}
	n.Heal()

	// Duplicate: b sees the request twice.
	n.SetDuplicate(1)
	if err := ae(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "duplicate counted", func() bool { return n.Stats()[KindAppendEntries].Duplicated > 0 })
}

func TestFaultFlap(t *testing.T) {
	n := New(1)
	n.Flap("a", "b", 30*time.Millisecond)
	var sawUp, sawDown bool
	waitFor(t, 2*time.Second, "flapping link seen up and down", func() bool {
		if n.LinkUp("b", "a") {
			sawUp = true
		} else {
			sawDown = true
		}
		return sawUp && sawDown
	})
	n.Flap("a", "b", 0)
	if !n.LinkUp("a", "b") {
		t.Fatal("flap not removed")
	}
}

func TestFaultPipeline(t *testing.T) {
	n := New(3)
	a, _ := inmemPair(t, n)
	p, err := a.AppendEntriesPipeline("b", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func() (raft.AppendFuture, error) {
		return p.AppendEntries(&raft.AppendEntriesRequest{Term: 5, RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a")}}, new(raft.AppendEntriesResponse))
	}
	next := func() raft.AppendFuture {
		select {
		case f := <-p.Consumer():
			return f
		case <-time.After(5 * time.Second):
			t.Fatal("no pipelined response")
			return nil
		}
	}
	if _, err := send(); err != nil {
		t.Fatal(err)
	}
	if f := next(); f.Error() != nil || !f.Response().Success || f.Response().Term != 5 {
		t.Fatalf("healthy pipeline: %v %+v", f.Error(), f.Response())
	}
	// Lost response: the future fails and its response is zeroed.
	n.Cut("b", "a")
	if _, err := send(); err != nil {
		t.Fatal(err)
	}
	if f := next(); !errors.Is(f.Error(), ErrInjected) || f.Response().Success || f.Response().Term != 0 {
		t.Fatalf("lost response: %v %+v", f.Error(), f.Response())
	}
	// Refused request.
	n.Heal()
	n.Cut("a", "b")
	if _, err := send(); !errors.Is(err, ErrInjected) {
		t.Fatalf("refused request: %v", err)
	}
	if _, err := a.AppendEntriesPipeline("b", "b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("pipeline over a down link: %v", err)
	}
	if got := len(n.AppendEntriesSenders()); got != 1 {
		t.Fatalf("senders: %v", n.AppendEntriesSenders())
	}
}

func TestFaultDecisionsReplayFromSeed(t *testing.T) {
	run := func(seed int64) []string {
		n := New(seed)
		n.SetDrop(0.5)
		n.SetDuplicate(0.5)
		n.SetDelay(0, time.Second)
		var out []string
		for i := 0; i < 50; i++ {
			v := n.decide(KindCall, "a", "b", true)
			out = append(out, v.lost+"/"+v.delay.String()+"/"+map[bool]string{true: "dup", false: ""}[v.dup])
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed diverged at %d: %s vs %s", i, a[i], b[i])
		}
	}
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("different seeds gave identical decisions")
	}
}

func TestCheckElectionSafety(t *testing.T) {
	n := New(1)
	hb := func(term uint64, id string) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: term, RPCHeader: raft.RPCHeader{ID: []byte(id), Addr: []byte(id + ":1")}}
	}
	n.recordAppend("n1:1", hb(2, "n1"))
	n.recordAppend("n1:1", hb(2, "n1"))
	n.recordAppend("n2:1", hb(3, "n2"))
	if err := n.CheckElectionSafety(); err != nil {
		t.Fatal(err)
	}
	n.recordAppend("n3:1", hb(3, "n3"))
	if err := n.CheckElectionSafety(); err == nil {
		t.Fatal("two leaders in term 3 not reported")
	}
}

func TestFaultCaller(t *testing.T) {
	srv := newTestMux(t, "srv")
	cli := newTestMux(t, "cli")
	var runs atomic.Int64
	srv.Handle("count", func(context.Context, []byte) ([]byte, error) { runs.Add(1); return []byte("ok"), nil })
	n := New(5)
	c := n.WrapCaller(cli.Addr(), cli)
	ctx := context.Background()
	from, to := raft.ServerAddress(cli.Addr()), raft.ServerAddress(srv.Addr())

	if got, err := c.Call(ctx, srv.Addr(), "count", nil); err != nil || string(got) != "ok" {
		t.Fatalf("healthy: %q %v", got, err)
	}
	n.Cut(from, to)
	if _, err := c.Call(ctx, srv.Addr(), "count", nil); !errors.Is(err, transport.ErrNotDelivered) || !errors.Is(err, ErrInjected) {
		t.Fatalf("cut request: %v", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("refused call ran the handler: %d", runs.Load())
	}
	n.Heal()
	n.Cut(to, from)
	if _, err := c.Call(ctx, srv.Addr(), "count", nil); !errors.Is(err, transport.ErrIndeterminate) || !errors.Is(err, ErrInjected) {
		t.Fatalf("lost response: %v", err)
	}
	if runs.Load() != 2 {
		t.Fatalf("lost-response call did not run the handler: %d", runs.Load())
	}
	n.Heal()
	n.SetDuplicate(1)
	if _, err := c.Call(ctx, srv.Addr(), "count", nil); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 4 {
		t.Fatalf("duplicated call ran the handler %d times in total, want 4", runs.Load())
	}
	if st := n.Stats()[KindCall]; st.Sent != 4 || st.Refused != 1 || st.Lost != 1 || st.Duplicated != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFaultLoseCallResponses(t *testing.T) {
	srv := newTestMux(t, "srv")
	cli := newTestMux(t, "cli")
	var runs atomic.Int64
	srv.Handle("count", func(context.Context, []byte) ([]byte, error) { runs.Add(1); return []byte("ok"), nil })
	srv.Handle("other", func(context.Context, []byte) ([]byte, error) { return []byte("ok"), nil })
	n := New(5)
	c := n.WrapCaller(cli.Addr(), cli)
	ctx := context.Background()
	n.LoseCallResponses(raft.ServerAddress(cli.Addr()), raft.ServerAddress(srv.Addr()), "count", 1)
	if _, err := c.Call(ctx, srv.Addr(), "other", nil); err != nil {
		t.Fatalf("another method lost its response: %v", err)
	}
	if _, err := c.Call(ctx, srv.Addr(), "count", nil); !errors.Is(err, transport.ErrIndeterminate) || !errors.Is(err, ErrInjected) {
		t.Fatalf("first call: %v, want its response lost", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the call whose response was lost ran %d times, want 1", runs.Load())
	}
	if got, err := c.Call(ctx, srv.Addr(), "count", nil); err != nil || string(got) != "ok" {
		t.Fatalf("second call: %q %v, want a normal answer", got, err)
	}
	if st := n.Stats()[KindCall]; st.Lost != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCutKindRefusesOnlyThatKindOnThatLink(t *testing.T) {
	n := New(1)
	a, _ := inmemPair(t, n)
	n.CutKind("a", "b", KindAppendEntries)
	var ae raft.AppendEntriesResponse
	err := a.AppendEntries("b", "b", &raft.AppendEntriesRequest{}, &ae)
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("append a->b with AppendEntries cut: %v, want ErrInjected", err)
	}
	var pv raft.RequestPreVoteResponse
	if err := a.(raft.WithPreVote).RequestPreVote("b", "b", &raft.RequestPreVoteRequest{}, &pv); err != nil || !pv.Granted {
		t.Fatalf("pre-vote a->b (another kind) = %v, %+v: want delivered and answered", err, pv)
	}
	if got := n.Stats()[KindAppendEntries].Refused; got != 1 {
		t.Fatalf("refused appends = %d, want 1", got)
	}
	if !n.LinkUp("a", "b") {
		t.Fatal("a kind cut reported the whole link down")
	}
	n.Heal()
	if err := a.AppendEntries("b", "b", &raft.AppendEntriesRequest{}, &ae); err != nil {
		t.Fatalf("append after Heal: %v", err)
	}
}
