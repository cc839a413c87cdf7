package raft_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/internal/pkitest"
	"github.com/jobraft/jobraft/raft"
)

// Three members under mutual TLS replicate, forward and answer status
// RPCs. A member whose certificate comes from another CA, and one without
// TLS at all, cannot join: the members refuse their connections (status
// RPCs fail both ways), adding them never completes, they receive no entry
// and commit no proposal; the cluster keeps committing throughout.
func TestMutualTLS(t *testing.T) {
	ca := pkitest.NewCA(t, "jobraft cluster CA")
	c := nodetest.Start(t, 3, nil, func(cfg *raft.Config) { cfg.TLS = ca.NodeTLS(t, cfg.ID) })
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
	rogueCfg := nodetest.FastConfig(t, "rogue", filepath.Join(t.TempDir(), "rogue"), nodetest.FreeAddr(t))
	rogueCfg.TLS = other.NodeTLS(t, "rogue")
	plainCfg := nodetest.FastConfig(t, "plain", filepath.Join(t.TempDir(), "plain"), nodetest.FreeAddr(t))
	outsiders["rogue"], outsiders["plain"] = &rogueCfg, &plainCfg
	for id, cfg := range outsiders {
		kv := nodetest.NewKV()
		n := nodetest.OpenNew(t, *cfg, kv)
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
		rctx, rcancel := context.WithTimeout(context.Background(), wait)
		if err := c.Nodes[l].RemoveMember(rctx, id); err != nil {
			t.Fatal(err)
		}
		rcancel()
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
