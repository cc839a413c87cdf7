package duties

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// Shell is what Run drives: the member, its applied state and clock.
type Shell struct {
	Node *raft.Node
	Jobs *fsm.Jobs
	// Clock is the member's clock (raft.Config.Clock).
	Clock func() time.Time
	// ExpireInterval is the tick; ProposeTimeout bounds one proposal.
	ExpireInterval, ProposeTimeout time.Duration
	Log                            hclog.Logger
}

// Run does the duties until life ends: it checks at every tick, on every
// role event, and when the next schedule tick is due (Wake).
func Run(life context.Context, sh Shell, p Policy) {
	events, cancel := sh.Node.Events(16)
	defer cancel()
	tick := time.NewTicker(sh.ExpireInterval)
	defer tick.Stop()
	fire := time.NewTimer(sh.ExpireInterval) // the next schedule tick
	defer fire.Stop()
	var s State
	for {
		select {
		case <-life.Done():
			return
		case <-events:
		case <-tick.C:
		case <-fire.C:
		}
		r := sh.Node.Raft()
		prev := s.Term
		var plan Plan
		s, plan = Decide(s, Tick{Leading: r.State() == hraft.Leader, Term: r.CurrentTerm(), Now: sh.Clock(), Jobs: sh.Jobs}, p)
		if s.Term != 0 && s.Term != prev {
			sh.Log.Debug("leader duties start", "term", s.Term)
		}
		if plan.Expire != nil {
			sh.propose(life, s.Term, plan.Expire)
		}
		if plan.Sweep != nil {
			sh.propose(life, s.Term, plan.Sweep)
		}
		if plan.Fire != nil {
			sh.propose(life, s.Term, plan.Fire)
		}
		if s.Term != 0 {
			wait, ok := sh.Jobs.ScheduleDue(sh.Clock())
			fire.Reset(Wake(wait, ok, sh.ExpireInterval))
		}
	}
}

// propose proposes cmd on this member for term only.
func (sh Shell) propose(life context.Context, term uint64, cmd fsm.Command) {
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		sh.Log.Error("leader command", "type", cmd.Type(), "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(life, sh.ProposeTimeout)
	defer cancel()
	if _, err := sh.Node.ProposeOnLeader(ctx, term, b); err != nil && !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrClosed) {
		sh.Log.Warn("leader command failed", "type", cmd.Type(), "term", term, "error", err)
	}
}
