//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
	"github.com/jobraft/jobraft/examples/internal/netrig"
)

// A fault a failover is measured from, and how it ends.
type fault struct {
	name       string
	start, end func(c *cluster.Cluster, r *netrig.Rig, leader int) error
}

var faults = []fault{
	{"kill", func(c *cluster.Cluster, _ *netrig.Rig, l int) error { return c.Kill(l) },
		func(c *cluster.Cluster, _ *netrig.Rig, l int) error { return c.Start(l) }},
	{"partition", func(_ *cluster.Cluster, r *netrig.Rig, l int) error { return r.Isolate(l) },
		func(_ *cluster.Cluster, r *netrig.Rig, _ int) error { return r.Heal() }},
	{"freeze", func(c *cluster.Cluster, _ *netrig.Rig, l int) error { return c.Freeze(l) },
		func(c *cluster.Cluster, _ *netrig.Rig, l int) error { return c.Thaw(l) }},
}

// failover starts f on the leader and returns how long until a submit to
// one of the other members succeeds: each of them is sent submits one
// after the other from the moment of the fault (each bounded by 3 s, a
// failed one retried after 5 ms), so the figure is what a client next to
// a surviving member waits. Then f ends and every member agrees on a
// leader again (within a minute) before it returns.
func failover(ctx context.Context, c *cluster.Cluster, r *netrig.Rig, f fault) (time.Duration, error) {
	id, _, err := c.Leader(ctx)
	if err != nil {
		return 0, err
	}
	l := c.Index(id)
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := f.start(c, r, l); err != nil {
		return 0, err
	}
	first := make(chan time.Duration, len(c.Members))
	for i, m := range c.Members {
		if i == l {
			continue
		}
		go func() {
			for pctx.Err() == nil {
				actx, acancel := context.WithTimeout(pctx, 3*time.Second)
				_, err := m.Client.Submit(actx, client.SubmitRequest{ID: client.NewID(), Queue: "probe", Kind: "probe"})
				acancel()
				if err == nil {
					first <- time.Since(t0)
					return
				}
				select {
				case <-pctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
	var took time.Duration
	select {
	case took = <-first:
	case <-pctx.Done():
		err = fmt.Errorf("%s of leader %s: no submit succeeded on another member within a minute", f.name, id)
	}
	cancel()
	if eerr := f.end(c, r, l); eerr != nil {
		return took, errors.Join(err, eerr)
	}
	if _, werr := c.Wait(ctx, time.Minute, nil); werr != nil {
		return took, errors.Join(err, fmt.Errorf("after %s of %s: %w", f.name, id, werr))
	}
	return took, err
}

// spread is the median, min and max of samples.
type spread struct{ Med, Min, Max time.Duration }

func spreadOf(s []time.Duration) spread {
	if len(s) == 0 {
		return spread{}
	}
	s = slices.Sorted(slices.Values(s))
	return spread{s[len(s)/2], s[0], s[len(s)-1]}
}
