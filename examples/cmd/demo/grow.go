package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
)

// growResult is what growing and shrinking the cluster measured.
type growResult struct {
	Promoted []promotion
	Removed  []string
}

type promotion struct {
	ID        string
	Took      time.Duration
	PeakBytes float64 // bytes per second, the leader's highest reading
}

// growShrink grows the cluster from its initial members to all its spares
// while it works (-grow): each spare is started with -join and the
// cluster's ID, added through POST /v1/cluster/members, and shown catching
// up (a progress line from GET /v1/cluster/members) until the leader's
// catch-up policy promotes it; then the cluster shrinks back: each spare is
// removed (DELETE /v1/cluster/members/{id}) and stopped.
func growShrink(ctx context.Context, cfg config, c *cluster.Cluster) (*growResult, error) {
	api := c.Members[0].Client
	var ms client.Membership
	if err := retry(ctx, 30*time.Second, func() (err error) { ms, err = api.Membership(ctx); return err }); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	res := &growResult{}
	for i, s := range c.Spares {
		if err := c.StartSpare(i, ms.ClusterID); err != nil {
			return res, err
		}
		start := time.Now()
		if err := retry(ctx, 30*time.Second, func() error { return api.AddMember(ctx, s.ID, s.Advertise) }); err != nil {
			return res, fmt.Errorf("add %s: %w", s.ID, err)
		}
		progress(cfg, "grow: %s added as a non-voter\n", s.ID)
		p := promotion{ID: s.ID}
		last := ""
		err := retry(ctx, 2*time.Minute, func() error {
			cur, err := api.Membership(ctx)
			if err != nil {
				return err
			}
			m, ok := cur.Find(s.ID)
			if !ok {
				return fmt.Errorf("%s not listed", s.ID)
			}
			p.PeakBytes = max(p.PeakBytes, m.BytesPerSecond)
			if line := progressLine(m); line != last {
				progress(cfg, "grow: %s\n", line)
				last = line
			}
			switch {
			case m.State == "stalled" || m.State == "diverged":
				return &permanent{fmt.Errorf("%s %s: %s (%s)", s.ID, m.State, m.Reason, m.Detail)}
			case m.Suffrage != "voter" || m.State != "caught_up":
				return fmt.Errorf("%s %s %s", s.ID, m.Suffrage, m.State)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		p.Took = time.Since(start)
		res.Promoted = append(res.Promoted, p)
		progress(cfg, "grow: %s promoted to voter after %s\n", s.ID, p.Took.Round(time.Millisecond))
	}
	for i := len(c.Spares) - 1; i >= 0; i-- {
		s := c.Spares[i]
		if err := retry(ctx, 30*time.Second, func() error { return api.RemoveMember(ctx, s.ID) }); err != nil {
			return res, fmt.Errorf("remove %s: %w", s.ID, err)
		}
		if err := c.StopSpare(i, 30*time.Second); err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, s.ID)
		progress(cfg, "shrink: %s removed and stopped\n", s.ID)
	}
	return res, retry(ctx, 30*time.Second, func() error {
		cur, err := api.Membership(ctx)
		if err == nil && len(cur.Members) != len(c.Members) {
			err = fmt.Errorf("%d members listed", len(cur.Members))
		}
		return err
	})
}

// progressLine is one member's catch-up state in a line.
func progressLine(m client.MemberInfo) string {
	parts := []string{fmt.Sprintf("%-4s %-9s %-12s lag %d", m.ID, m.Suffrage, m.State, m.Lag)}
	if m.BytesPerSecond > 0 || m.EntriesPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%.1f MB/s %.0f entries/s", m.BytesPerSecond/1e6, m.EntriesPerSecond))
	}
	if m.SnapshotBytesRemaining > 0 {
		parts = append(parts, fmt.Sprintf("snapshot %.1f MB to go", float64(m.SnapshotBytesRemaining)/1e6))
	}
	if m.ETASeconds > 0 {
		parts = append(parts, fmt.Sprintf("ETA %.1fs", m.ETASeconds))
	}
	if m.Reason != "" {
		parts = append(parts, m.Reason)
	}
	return strings.Join(parts, ", ")
}

// permanent is an error retry does not retry.
type permanent struct{ error }

// retry calls fn until it returns nil, a *permanent error, or d passes.
func retry(ctx context.Context, d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if p, ok := err.(*permanent); ok {
			return p.error
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond): // poll interval
		}
	}
}
