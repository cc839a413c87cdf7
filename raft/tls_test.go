package raft_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/pkitest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
)

// Three members under mutual TLS replicate, forward and answer status
// RPCs. A member whose certificate comes from another CA, and one without
// TLS at all, cannot join: the members refuse their connections (status
// RPCs fail both ways), adding them never completes, they receive no entry
// and commit no proposal; the cluster keeps committing throughout.
func TestMutualTLS(t *testing.T) {
	ca := pkitest.NewCA(t, "jobraft cluster CA")
	c := clustertest.StartNodes(t, 3, nil, func(cfg *raft.Config) { cfg.TLS = ca.NodeTLS(t, cfg.ID) })
	l := c.WaitLeader(wait)
	for i := range c.Nodes {
		proposeN(t, c, i, "tls"+c.Cfgs[i].ID+"-", 5)
	}
	c.WaitConverged(wait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for i := range c.Nodes {
		s, err := c.Nodes[(i+1)%3].StatusOf(ctx, c.Nodes[i].Addr())
		if err != nil || s.ID != c.Cfgs[i].ID {
			t.Fatalf("status of m%d over mutual TLS: %+v, %v", i, s, err)
		}
	}

	other := pkitest.NewCA(t, "some other CA")
	outsiders := map[string]*raft.Config{}
	rogueCfg := clustertest.FastConfig(t, "rogue", filepath.Join(t.TempDir(), "rogue"), clustertest.FreeAddr(t))
	rogueCfg.TLS = other.NodeTLS(t, "rogue")
	plainCfg := clustertest.FastConfig(t, "plain", filepath.Join(t.TempDir(), "plain"), clustertest.FreeAddr(t))
	outsiders["rogue"], outsiders["plain"] = &rogueCfg, &plainCfg
	for id, cfg := range outsiders {
		kv := clustertest.NewKV()
		n := clustertest.OpenNew(t, *cfg, kv)
		var wg sync.WaitGroup
		for i, m := range c.Nodes {
			wg.Add(2)
			go func() {
				defer wg.Done()
				qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
				defer qcancel()
				if _, err := m.StatusOf(qctx, n.Addr()); err == nil {
					t.Errorf("m%d reached %s over the status RPC", i, id)
				}
			}()
			go func() {
				defer wg.Done()
				qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
				defer qcancel()
				if _, err := n.StatusOf(qctx, m.Addr()); err == nil {
					t.Errorf("%s reached m%d over the status RPC", id, i)
				}
			}()
		}
		wg.Wait()
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.Nodes[l].AddMember(actx, id, n.Addr())
		acancel()
		if err == nil {
			t.Fatalf("%s was added and promoted", id)
		}
		t.Logf("adding %s: %v", id, err)
		// Listed as a non-voter it changes no quorum: the cluster commits.
		proposeN(t, c, (l+1)%3, "with-"+id+"-", 5)
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		_, err = n.Propose(pctx, []byte("from-"+id+"=v"))
		pcancel()
		if err == nil || !errors.Is(err, raft.ErrRejected) {
			t.Errorf("proposal on %s: %v, want a rejection", id, err)
		}
		st := n.Status()
		if st.LastIndex != 0 || st.CommitIndex != 0 || st.Term != 0 || kv.Len() != 0 || st.LeaderID != "" {
			t.Errorf("%s received something: %+v, %d keys", id, st, kv.Len())
		}
		// RemoveMember is idempotent: a leadership change under load
		// (excused only by a measured stall) is retried on the next leader.
		for {
			lead := leadershipOf(c)
			rctx, rcancel := context.WithTimeout(context.Background(), wait)
			err := c.Nodes[lead.ld].RemoveMember(rctx, id)
			rcancel()
			if err == nil {
				break
			}
			lead.excuse(t, c, err, "removing "+id)
		}
	}
	c.WaitConverged(wait)
	for i := range c.Nodes {
		if got := c.KVs[i].Len(); got != 25 {
			t.Fatalf("m%d holds %d keys, want 25", i, got)
		}
		if len(c.Nodes[i].Status().Members) != 3 {
			t.Fatalf("m%d members %+v", i, c.Nodes[i].Status().Members)
		}
	}
}

// Members' identity (docs/transport.md, "Member identity"). An impostor
// holds a valid certificate of the cluster CA issued for member y and
// tries to pass for member x:
//
//   - its raft requests claiming x (or the leader) — a vote that would
//     depose the leader, an append that would install a term and an entry,
//     a TimeoutNow that would start an election — are refused before raft
//     sees them, while its pre-vote as y is answered (the control: its
//     certificate is good, only the claim is refused);
//   - listening at x's address once x is down, it is dialed by nobody: the
//     leader's replication to x and a status call to x refuse it (the
//     server's certificate must name x), its raft consumer and RPC handler
//     see nothing, and the cluster keeps committing; x, restarted at the
//     same address with its own certificate, catches up.
func TestMutualTLSMemberIdentity(t *testing.T) {
	ca := pkitest.NewCA(t, "jobraft cluster CA")
	c := clustertest.StartNodes(t, 3, nil, func(cfg *raft.Config) { cfg.TLS = ca.NodeTLS(t, cfg.ID) })
	l := c.WaitLeader(wait)
	x, y := (l+1)%3, (l+2)%3
	proposeN(t, c, l, "before-", 5)
	c.WaitConverged(wait)
	ls := c.Nodes[l].Status()
	forgedTerm := ls.Term + 1000 // far above any term the cluster reaches by itself during the test

	evil, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0", TLS: ca.NodeTLS(t, c.Cfgs[y].ID)})
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	ent, err := evil.RaftTransport(transport.RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ent.Close()
	tr := evil.BindTargets(ent)
	as := func(i int) hraft.RPCHeader {
		return hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(c.Cfgs[i].ID), Addr: []byte(c.Nodes[i].Addr())}
	}
	to := func(i int) (hraft.ServerID, hraft.ServerAddress) {
		return hraft.ServerID(c.Cfgs[i].ID), hraft.ServerAddress(c.Nodes[i].Addr())
	}
	before := make([]uint64, 3)
	for i := range c.Nodes {
		before[i] = c.Nodes[i].Status().IdentityRefused.Inbound
	}
	id, addr := to(l)
	if err := tr.RequestVote(id, addr, &hraft.RequestVoteRequest{RPCHeader: as(x), Term: forgedTerm,
		LastLogIndex: ls.LastIndex + 1000, LastLogTerm: ls.Term, LeadershipTransfer: true}, &hraft.RequestVoteResponse{}); err == nil {
		t.Errorf("vote request claiming m%d accepted by the leader", x)
	}
	id, addr = to(x)
	if err := tr.AppendEntries(id, addr, &hraft.AppendEntriesRequest{RPCHeader: as(l), Term: forgedTerm, PrevLogEntry: ls.LastIndex, PrevLogTerm: ls.LastTerm,
		Entries: []*hraft.Log{{Index: ls.LastIndex + 1, Term: forgedTerm, Type: hraft.LogCommand, Data: []byte("forged=v")}}}, &hraft.AppendEntriesResponse{}); err == nil {
		t.Errorf("append claiming the leader m%d accepted by m%d", l, x)
	}
	if err := tr.TimeoutNow(id, addr, &hraft.TimeoutNowRequest{RPCHeader: as(l)}, &hraft.TimeoutNowResponse{}); err == nil {
		t.Errorf("TimeoutNow claiming the leader m%d accepted by m%d", l, x)
	}
	// Control: as itself (y), its pre-vote is answered (and changes nothing).
	id, addr = to(l)
	if err := tr.(hraft.WithPreVote).RequestPreVote(id, addr, &hraft.RequestPreVoteRequest{RPCHeader: as(y), Term: forgedTerm,
		LastLogIndex: ls.LastIndex, LastLogTerm: ls.LastTerm}, &hraft.RequestPreVoteResponse{}); err != nil {
		t.Fatalf("pre-vote as m%d, its own identity: %v", y, err)
	}
	for i, want := range map[int]uint64{l: 1, x: 2} {
		if got := c.Nodes[i].Status().IdentityRefused.Inbound - before[i]; got != want {
			t.Errorf("m%d counted %d refused raft requests, want %d", i, got, want)
		}
	}
	for i := range c.Nodes {
		if st := c.Nodes[i].Status(); st.Term >= forgedTerm {
			t.Fatalf("m%d adopted the forged term: %+v", i, st)
		}
	}
	proposeN(t, c, x, "after-claims-", 5)

	// x goes down; the impostor takes its address.
	xAddr := c.Nodes[x].Addr()
	c.StopMember(x)
	var imp *transport.Mux
	clustertest.WaitFor(t, wait, "the impostor listening at x's address", func() bool {
		imp, err = transport.Listen(transport.Config{BindAddr: xAddr, TLS: ca.NodeTLS(t, c.Cfgs[y].ID)})
		return err == nil // the port may linger after the stop
	})
	var served atomic.Int64
	imp.Handle("jr.status", func(context.Context, []byte) ([]byte, error) {
		served.Add(1)
		return json.Marshal(raft.Status{ID: c.Cfgs[x].ID})
	})
	imt, err := imp.RaftTransport(transport.RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for rpc := range imt.Consumer() {
			served.Add(1)
			rpc.Respond(nil, errors.New("impostor"))
		}
	}()
	outBefore := c.Nodes[l].Status().IdentityRefused.Outbound
	proposeN(t, c, y, "impostor-up-", 5)
	clustertest.WaitFor(t, wait, "the leader refusing the impostor at x's address", func() bool {
		return c.Nodes[l].Status().IdentityRefused.Outbound > outBefore
	})
	sctx, scancel := context.WithTimeout(context.Background(), wait)
	_, err = c.Nodes[y].StatusOf(sctx, xAddr)
	scancel()
	if !errors.Is(err, transport.ErrWrongMember) {
		t.Fatalf("status of x's address served by the impostor: %v, want transport.ErrWrongMember", err)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("the impostor at x's address served %d requests", n)
	}
	_ = imt.Close()
	_ = imp.Close()

	// x, back at its address with its own certificate, catches up.
	c.StartMember(x)
	c.WaitConverged(wait)
	for i := range c.Nodes {
		if got := c.KVs[i].Len(); got != 15 {
			t.Fatalf("m%d holds %d keys, want 15", i, got)
		}
		if _, ok := c.KVs[i].Get("forged"); ok {
			t.Fatalf("m%d applied the forged entry", i)
		}
	}
}
