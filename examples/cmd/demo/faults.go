//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobraft/jobraft/examples/internal/cluster"
	"github.com/jobraft/jobraft/examples/internal/netrig"
)

// netnsFaults is a fault schedule for a cluster placed in rig r, timed by
// the heartbeat timeout hb: each step waits until every member agrees on a
// leader again before the next. In order: resets on every link of the
// leader, a bandwidth cap on every link, a one-way cut from the leader to
// a follower, the leader isolated (until the others elect another), the
// leader frozen with SIGSTOP (likewise, then SIGCONT), the leader
// SIGKILLed (likewise, then restarted). It returns the killed member's ID.
func netnsFaults(r *netrig.Rig, hb time.Duration, cfg *config) func(context.Context, *cluster.Cluster) (string, error) {
	return func(ctx context.Context, c *cluster.Cluster) (string, error) {
		hold := func(d time.Duration) error {
			select {
			case <-time.After(d): // the fault's duration, not a wait for state
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		// replaced: the leader is faulted until the others elect another.
		replaced := func(leader int, term uint64) error {
			_, _, err := c.NewLeader(ctx, leader, term)
			return err
		}
		steps := []struct {
			name  string
			fault func(leader int, term uint64) error
		}{
			{"resets on the leader's links", func(l int, _ uint64) error {
				for k := range c.Members {
					if k != l {
						if err := r.Resets(netrig.Link{From: l, To: k}, 200*time.Millisecond); err != nil {
							return err
						}
						if err := r.Resets(netrig.Link{From: k, To: l}, 200*time.Millisecond); err != nil {
							return err
						}
					}
				}
				return errors.Join(hold(2*hb), r.Heal())
			}},
			{"every link capped at 256 KB/s", func(int, uint64) error {
				return errors.Join(r.Bandwidth(256), hold(2*hb), r.Bandwidth(0))
			}},
			{"one-way cut from the leader to a follower", func(l int, _ uint64) error {
				return errors.Join(r.Cut(l, (l+1)%len(c.Members)), hold(3*hb), r.Heal())
			}},
			{"leader isolated", func(l int, term uint64) error {
				return errors.Join(r.Isolate(l), replaced(l, term), r.Heal())
			}},
			{"leader frozen (SIGSTOP)", func(l int, term uint64) error {
				return errors.Join(c.Freeze(l), replaced(l, term), c.Thaw(l))
			}},
			{"leader killed (SIGKILL), restarted", func(l int, term uint64) error {
				return errors.Join(c.Kill(l), replaced(l, term), c.Start(l))
			}},
		}
		killed := ""
		if err := hold(hb); err != nil {
			return "", err
		}
		for _, s := range steps {
			id, term, err := c.Leader(ctx)
			if err != nil {
				return killed, fmt.Errorf("before %s: %w", s.name, err)
			}
			t0 := time.Now()
			if err := s.fault(c.Index(id), term); err != nil {
				return killed, fmt.Errorf("%s (leader %s): %w", s.name, id, err)
			}
			if s.name == steps[len(steps)-1].name {
				killed = id
			}
			if _, err := c.Wait(ctx, time.Minute, nil); err != nil {
				return killed, fmt.Errorf("after %s (leader %s): %w", s.name, id, err)
			}
			progress(*cfg, "fault: %s (leader %s): healed, one leader again after %v\n", s.name, id, time.Since(t0).Round(time.Millisecond))
		}
		return killed, nil
	}
}
