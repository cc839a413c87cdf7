package jobraft

import (
	"context"
	"errors"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// duties runs the leader's periodic commands while this member leads:
//
//   - ExpireCmd every ExpireInterval, with LeaderSince = this member's clock
//     when it was first seen leading in the current term (never earlier
//     than it took office, so the FSM's skew rule stays conservative). It is
//     proposed with raft.Node.ProposeOnLeader for that term: never
//     forwarded, never proposed in another term.
//   - FireCmd when a schedule's tick is due by this member's clock (fireDue,
//     schedules.go), waking for the next tick.
//   - SweepCmd every SweepInterval with the retention policy, when its
//     state shows a job the sweep would remove (an idle cluster writes
//     nothing).
//
// It checks the role at every tick and on every role event; a member that
// steps down stops proposing at its next check (a proposal racing the step
// down is refused by raft as not-leader).
func (c *Controller) duties() {
	defer c.wg.Done()
	events, cancel := c.node.Events(16)
	defer cancel()
	tick := time.NewTicker(c.cfg.ExpireInterval)
	defer tick.Stop()
	fire := time.NewTimer(c.cfg.ExpireInterval) // the next schedule tick (fireDue)
	defer fire.Stop()
	var (
		term      uint64 // the term we lead in, 0 if not leading
		since     time.Time
		lastSweep time.Time
	)
	for {
		select {
		case <-c.closed:
			return
		case <-events:
		case <-tick.C:
		case <-fire.C:
		}
		r := c.node.Raft()
		if r.State() != hraft.Leader {
			term = 0
			continue
		}
		if t := r.CurrentTerm(); t != term {
			term, since, lastSweep = t, c.cfg.Clock(), c.cfg.Clock()
			c.log.Debug("leader duties start", "term", term)
		}
		if c.leaseDue() {
			c.leaderCmd(term, &fsm.ExpireCmd{LeaderSince: since, Term: term})
		}
		sweep := fsm.SweepCmd{MaxAge: max(c.cfg.RetainFor, 0), MaxPerQueue: c.cfg.RetainPerQueue}
		if (c.cfg.RetainFor > 0 || c.cfg.RetainPerQueue > 0) && c.cfg.Clock().Sub(lastSweep) >= c.cfg.SweepInterval &&
			c.jobs.Sweepable(sweep.MaxAge, sweep.MaxPerQueue, c.cfg.Clock()) {
			lastSweep = c.cfg.Clock()
			c.leaderCmd(term, &sweep)
		}
		fire.Reset(c.fireDue(term))
	}
}

func (c *Controller) leaderCmd(term uint64, cmd fsm.Command) {
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		c.log.Error("leader command", "type", cmd.Type(), "error", err)
		return
	}
	ctx, cancel := c.opCtx(context.Background())
	defer cancel()
	if _, err := c.node.ProposeOnLeader(ctx, term, b); err != nil && !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrClosed) {
		c.log.Warn("leader command failed", "type", cmd.Type(), "term", term, "error", err)
	}
}

// leaseDue reports whether some running job's lease deadline has passed on
// this member's clock (the leader's state is current enough: a lease it
// has not applied yet is not due).
func (c *Controller) leaseDue() bool { return c.jobs.LeaseDue(c.cfg.Clock()) }

// fireDue is the leader duty for schedules: when this member's state shows
// a schedule due by its own clock (translated into the log's time), it
// proposes a FireCmd for term; Apply fires what is due at the entry's log
// time, so a repeated or concurrent proposal fires nothing twice. It
// returns how long the duty loop may sleep before the next tick.
func (c *Controller) fireDue(term uint64) time.Duration {
	wait, ok := c.jobs.ScheduleDue(c.cfg.Clock())
	if ok && wait == 0 {
		c.leaderCmd(term, &fsm.FireCmd{})
		wait, ok = c.jobs.ScheduleDue(c.cfg.Clock())
	}
	if !ok || wait > c.cfg.ExpireInterval {
		return c.cfg.ExpireInterval
	}
	return max(wait, time.Millisecond)
}
