package jobraft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/watchlog"
)

// ClaimRequest asks for up to Max ready jobs from Queues.
type ClaimRequest struct {
	// Queues to claim from, best job first across them (priority, then
	// run-at, then submit order). Paused queues are skipped.
	Queues []string
	// Kinds, if set, limits the claim to jobs of these kinds (at most
	// fsm.MaxClaimKinds): a worker names the kinds it has handlers for, and
	// jobs of other kinds stay pending for workers that handle them.
	Kinds []string
	// Worker names the claimant (recorded in the lease; 1..128 bytes).
	Worker string
	// Max jobs to claim (default 1, at most fsm.MaxClaim).
	Max int
	// LeaseTTL is the lease length (default Config.LeaseTTL).
	LeaseTTL time.Duration
	// Wait > 0 long-polls: when nothing is ready, Claim waits up to Wait
	// for a job to become ready instead of returning empty at once. While
	// it waits it proposes nothing: it reads this member's applied state
	// and proposes a claim only when that shows a claimable job (a submit,
	// retry, nak, expiry or resume applied on this member wakes it; due
	// scheduled jobs are rechecked every Config.ClaimPollInterval, when a
	// follower also reads through the leader in case it is behind), so
	// idle workers write nothing to the log and a claimable job waits at
	// most one poll interval for a waiting claim to see it.
	Wait time.Duration
}

// command is the claim command of req (its defaults filled): up to
// req.Max jobs (at most fsm.MaxClaim) under claim ID id.
func (req *ClaimRequest) command(id string) *fsm.ClaimCmd {
	return &fsm.ClaimCmd{Queues: req.Queues, Worker: req.Worker, Max: uint32(min(req.Max, fsm.MaxClaim)), TTL: req.LeaseTTL, Kinds: req.Kinds, ID: id}
}

// Claim leases up to req.Max ready jobs to req.Worker. An empty result with
// a nil error means nothing was ready (within req.Wait).
//
// A claim reaches the log only when a job is claimable: without Wait, this
// member's applied state is checked first and, when it shows nothing, a
// linearizable read (a leader round trip, no entry) brings it up to the
// cluster's committed state and it is checked again; still nothing is an
// empty answer with no entry written, reflecting the committed state. A
// claim that is proposed shares its raft entry with concurrent claims,
// acks, naks, extends and terms of this member (fsm.BatchCmd): one entry
// grants the leases of many waiting workers. With Wait, the claim is proposed
// only once this member's applied state shows a claimable job (see
// ClaimRequest.Wait): a member that is behind proposes later, never
// wrongly, since the leader decides what a claim leases. A job due by the
// leader's clock is seen as due by this member's clock, so members' clock
// offsets shift when a long-polling worker notices it, by at most the
// offset.
//
// Every claim carries a fresh claim ID (fsm.ClaimCmd.ID): an attempt whose
// outcome is unknown (leader lost mid-commit) is retried with it until the
// outcome is known or ctx ends, and a retry answers the leases the earlier
// attempt granted, if it did, instead of leasing more. The error is of
// exactly one outcome class (see ErrOutcomeUnknown): ErrOutcomeUnknown
// only if ctx ended (or the controller closed) while an attempt's outcome
// was unknown: jobs it may have leased are then held by nobody and come
// back after their lease expires (that attempt counts);
// ErrNotApplied if nothing was claimed and the context ended (also while
// waiting); ErrQueuePaused if every queue named is paused (with Wait: on
// this member when the wait ends; the claim waits through a pause, and a
// resume applied on this member wakes it). A claim that returns jobs has
// committed: each lease is valid until its deadline unless extended, and
// is only ever expired by the leader, no earlier than the deadline on the
// leader's clock and, after a leader change, no earlier than a full TTL
// after the new leader took office.
func (c *Controller) Claim(ctx context.Context, req ClaimRequest) (leases []*Lease, err error) {
	if req.Max <= 0 {
		req.Max = 1
	}
	req.LeaseTTL = c.cfg.leaseTTL(req.LeaseTTL)
	// The ID makes retrying the claim safe: a retry answers the leases
	// an earlier attempt of it granted (fsm.ClaimCmd.ID).
	cmd := req.command(NewID())
	if err := fsm.Validate(cmd); err != nil {
		return nil, mapErr(err)
	}
	if req.Wait <= 0 {
		ok := c.jobs.Claimable(req.Queues, req.Kinds, c.cfg.Clock().Add(claimSkew))
		if !ok {
			// Nothing here: make sure this member is not behind before
			// answering empty (a read, no entry).
			if _, err := c.node.LinearizableRead(ctx); err != nil {
				if c.isClosed() {
					return nil, ErrClosed
				}
				return nil, &classed{class: ErrNotApplied, cause: err} // nothing was proposed
			}
			ok = c.jobs.Claimable(req.Queues, req.Kinds, c.cfg.Clock().Add(claimSkew))
		}
		if !ok {
			return nil, c.pausedErr(req.Queues)
		}
		return c.claimOnce(ctx, cmd)
	}
	// The timer starts only when the claim has to wait: a claim that finds
	// a job at once (a busy queue) allocates and arms none. It fires at
	// the next poll or at the wait's end, whichever is first.
	start := time.Now()
	var timer *time.Timer
	next := func() time.Duration { return min(c.cfg.ClaimPollInterval, max(0, req.Wait-time.Since(start))) }
	// w is this claim in the member's line of waiting claims, registered
	// before each check of the state; held are the turns it was woken with
	// (jobs made claimable for it) that it owes a claim.
	w := c.rec.WaitClaim(req.Queues, req.Kinds, req.Max)
	var held []watchlog.Turn
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		// Turns whose jobs this claim did not take go to the next claims
		// in line: a claim that ends first (its context, its wait, an
		// error) or takes fewer jobs strands none.
		c.rec.Pass(untaken(append(held, c.rec.Withdraw(w)...), leases))
	}()
	fresh := false // catch up with the leader before the next local check
	for {
		ok := c.jobs.Claimable(req.Queues, req.Kinds, c.cfg.Clock().Add(claimSkew))
		if !ok && fresh {
			// A follower's view may be behind (it applies what the leader
			// committed a little later, or much later when slow): once per
			// poll interval it reads through the leader, so a claimable
			// job is never missed for longer than that. A failed read
			// (no leader) is retried at the next poll.
			fresh = false
			rctx, cancel := context.WithTimeout(ctx, c.cfg.ClaimPollInterval)
			_, err := c.node.LinearizableRead(rctx)
			cancel()
			ok = err == nil && c.jobs.Claimable(req.Queues, req.Kinds, c.cfg.Clock().Add(claimSkew))
		}
		if !ok {
			held = nil // their jobs are taken, or not claimable yet (paused, limited, scheduled)
		} else {
			held = append(held, c.rec.Proposing(w)...)
			leases, err = c.claimOnce(ctx, cmd)
			if err != nil || len(leases) > 0 {
				return leases, err
			}
			// Empty: this member was behind (another worker took the
			// job) or its clock ahead of the leader's. Propose again
			// only after the next job for it or poll; its turns go on,
			// once more at most.
			c.emptyClaims.Add(1)
			c.rec.Pass(passedOn(held))
			held = nil
			c.rec.Idle(w)
		}
		if timer == nil {
			timer = time.NewTimer(next())
		}
		select {
		case <-w.Woken():
			held = append(held, c.rec.Withdraw(w)...)
			c.rec.Rewait(w) // in line again before the next check
			if c.claimWoken != nil {
				c.claimWoken()
			}
			if err := ctx.Err(); err != nil {
				return nil, classify(err) // ErrNotApplied; its turns go on
			}
		case <-timer.C:
			if time.Since(start) >= req.Wait {
				return nil, c.pausedErr(req.Queues)
			}
			fresh = !c.leading() // a poll
			timer.Reset(next())
		case <-ctx.Done():
			return nil, classify(ctx.Err()) // ErrNotApplied
		case <-c.closed:
			return nil, ErrClosed
		}
	}
}

// untaken is what is left of turns once the jobs of leases are taken
// from them (by queue and kind).
func untaken(turns []watchlog.Turn, leases []*Lease) []watchlog.Turn {
	for _, l := range leases {
		for i := range turns {
			if t := &turns[i]; t.N > 0 && t.Queue == l.Job.Queue && t.Kind == l.Job.Kind {
				t.N--
				break
			}
		}
	}
	return slices.DeleteFunc(turns, func(t watchlog.Turn) bool { return t.N == 0 })
}

// passedOn is what a claim that came back empty hands on of its turns:
// those not handed to it by another such claim.
func passedOn(turns []watchlog.Turn) []watchlog.Turn {
	turns = slices.DeleteFunc(turns, func(t watchlog.Turn) bool { return t.Passed })
	for i := range turns {
		turns[i].Passed = true
	}
	return turns
}

// pausedErr is the answer of a claim that found nothing: ErrQueuePaused
// when this member's state shows every queue claimed paused, else nil.
func (c *Controller) pausedErr(queues []string) error {
	if c.allPaused(queues) {
		return &classed{class: ErrQueuePaused, cause: fmt.Errorf("%w: every queue claimed is paused on member %s", fsm.ErrQueuePaused, c.cfg.ID)}
	}
	return nil
}

// leading reports whether this member is the leader (its applied state is
// then as fresh as the cluster's committed one, up to in-flight applies,
// which wake claims when they land).
func (c *Controller) leading() bool { return c.node.Raft().State() == hraft.Leader }

// allPaused reports whether this member's state shows every queue of a
// claim paused, as the state machine decides (unknown queues are empty,
// not paused).
func (c *Controller) allPaused(queues []string) bool {
	paused := false
	for _, name := range queues {
		q, ok := c.jobs.Queue(name)
		switch {
		case !ok:
		case !q.Paused:
			return false
		default:
			paused = true
		}
	}
	return paused
}

// claimOnce proposes cmd; after an attempt whose outcome is unknown it
// retries with the same claim ID while ctx allows, so the leases that
// attempt may have granted are answered to this caller, not left to expire.
func (c *Controller) claimOnce(ctx context.Context, cmd *fsm.ClaimCmd) ([]*Lease, error) {
	var unknown error // the first attempt whose outcome was unknown
	var r fsm.Result
	for {
		var err error
		r, err = c.apply(ctx, cmd)
		if err == nil {
			break
		}
		if errors.Is(err, ErrOutcomeUnknown) && unknown == nil {
			unknown = err
		}
		if unknown != nil && errors.Is(err, ErrNoLeader) {
			return nil, unknownOutcome(unknown, err) // no leader reached within LeaderWait
		}
		retry := errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotApplied)
		if unknown == nil || !retry {
			return nil, err // a definite answer, even after an unknown attempt
		}
		select {
		case <-ctx.Done():
			return nil, unknownOutcome(unknown, err)
		case <-c.closed:
			return nil, unknownOutcome(unknown, ErrClosed)
		case <-time.After(c.retryPause()):
		}
	}
	leases := make([]*Lease, 0, len(r.Jobs))
	for _, j := range r.Jobs {
		l := &Lease{Job: j, Token: j.Lease.Token, c: c}
		l.deadline.Store(j.Lease.Deadline.UnixNano())
		leases = append(leases, l)
	}
	return leases, nil
}

// claimSkew widens the local check that keeps a claim off the log when
// nothing is claimable: a scheduled job counts as claimable when it is due
// within claimSkew of this member's clock. Whether it is due is decided at
// apply by the leader's entry time, and members' clocks may differ by
// seconds: judged by this member's clock alone, a claim served by a member
// whose clock is behind answered empty for a job already due (found by the
// chaos harness, seed 24, a clock skewed by 800 ms: not linearizable). A
// claim that reaches the log early just leases nothing.
const claimSkew = 5 * time.Second
