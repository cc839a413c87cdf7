package jobraft

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobraft/jobraft/fsm"
)

// Consistency chooses how fresh a read is.
type Consistency int

const (
	// Linearizable (the default): the read reflects every write
	// acknowledged anywhere before it began. It costs a round trip to the
	// leader (a quorum heartbeat) and waits for this member to apply up to
	// the leader's commit index.
	Linearizable Consistency = iota
	// Local reads this member's applied state as it is: possibly stale
	// (a follower behind, or a partitioned former leader), never torn.
	Local
)

func (c *Controller) read(ctx context.Context, cons Consistency) error {
	if c.isClosed() {
		return ErrClosed
	}
	if cons == Local {
		return nil
	}
	_, err := c.node.LinearizableRead(ctx)
	return err
}

// Get returns the job with its payload, or ErrNotFound.
func (c *Controller) Get(ctx context.Context, id string, cons Consistency) (Job, error) {
	if err := c.read(ctx, cons); err != nil {
		return Job{}, err
	}
	j, ok := c.jobs.Get(id)
	if !ok {
		return Job{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return j, nil
}

// ListFilter selects the jobs of one queue, in one state or all.
type ListFilter struct {
	Queue string
	// State selects one state; 0 lists every state, in state order
	// (pending, scheduled, running, succeeded, dead, canceled, waiting).
	State       State
	Consistency Consistency
}

// Page asks for one page of a listing.
type Page struct {
	// Cursor is the previous page's Next; empty for the first page.
	Cursor string
	// Limit is the page size (0: fsm.DefaultListLimit; at most
	// fsm.MaxListLimit).
	Limit int
}

// JobPage is one page; Next is empty on the last page.
type JobPage struct {
	Jobs []Job
	Next string
}

// List returns a page of a queue's jobs (payload included), in the order of
// each state's index (see fsm.Jobs.List). Paging is stable while jobs
// change: a cursor resumes strictly after the last job returned in that
// order (a job that changes state meanwhile may be seen twice or not at
// all, as with any cursor over live data).
func (c *Controller) List(ctx context.Context, f ListFilter, p Page) (JobPage, error) {
	if err := c.read(ctx, f.Consistency); err != nil {
		return JobPage{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = fsm.DefaultListLimit
	}
	limit = min(limit, fsm.MaxListLimit)
	if f.State != 0 {
		pg, err := c.jobs.List(fsm.ListQuery{Queue: f.Queue, State: f.State, Cursor: p.Cursor, Limit: limit})
		return JobPage(pg), mapList(err)
	}
	// Every state: the cursor is "<state>:<inner cursor>".
	st, inner := StatePending, ""
	if p.Cursor != "" {
		a, b, ok := strings.Cut(p.Cursor, ":")
		n, err := strconv.Atoi(a)
		if !ok || err != nil || !State(n).Valid() {
			return JobPage{}, fmt.Errorf("%w: cursor %q", ErrInvalidRequest, p.Cursor)
		}
		st, inner = State(n), b
	}
	var out JobPage
	for ; st.Valid(); st, inner = st+1, "" {
		pg, err := c.jobs.List(fsm.ListQuery{Queue: f.Queue, State: st, Cursor: inner, Limit: limit - len(out.Jobs)})
		if err != nil {
			return JobPage{}, mapList(err)
		}
		out.Jobs = append(out.Jobs, pg.Jobs...)
		if pg.Next != "" {
			out.Next = strconv.Itoa(int(st)) + ":" + pg.Next
			return out, nil
		}
		if len(out.Jobs) == limit {
			if (st + 1).Valid() {
				out.Next = strconv.Itoa(int(st+1)) + ":"
			}
			return out, nil
		}
	}
	return out, nil
}

func mapList(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
}

// Stats is a member's view of the cluster and the jobs.
type Stats struct {
	Member       string
	Role         string
	Term         uint64
	Leader       string
	AppliedIndex uint64
	Jobs         int
	Queues       []fsm.QueueInfo
	// Limits are the queues' limits (limits.go), with the claims they
	// held back.
	Limits []fsm.QueueLimits
	// SubmitEntries and SubmittedJobs count this member's submit entries
	// and the jobs they carried since Open (their ratio is the batching).
	SubmitEntries uint64
	SubmittedJobs uint64
	// BatchHolds counts the times this member's next entries waited for
	// the callers of an answered one (Config.BatchHold), BatchHoldsExpired
	// those that ended at BatchHold rather than when the callers were
	// back: when most expire, the callers do not come straight back, and
	// the hold only adds latency (set BatchHold negative).
	BatchHolds        uint64
	BatchHoldsExpired uint64
	// WatchOldest is the oldest index Watch can start from on this member.
	WatchOldest uint64
}

// Stats returns counts per queue and state, linearizable: they reflect
// every write acknowledged before the call.
func (c *Controller) Stats(ctx context.Context) (Stats, error) {
	if err := c.read(ctx, Linearizable); err != nil {
		return Stats{}, err
	}
	return c.LocalStats(), nil
}

// LocalStats is Stats from this member's state as it is now, without a
// leader round trip: it may lag the cluster (and, on a partitioned member,
// stay behind), which is what a metrics scrape wants.
func (c *Controller) LocalStats() Stats {
	r := c.node.Raft()
	_, leader := r.LeaderWithID()
	oldest, _ := c.rec.Bounds()
	return Stats{
		Member: c.cfg.ID, Role: r.State().String(), Term: r.CurrentTerm(), Leader: string(leader),
		AppliedIndex: c.jobs.AppliedIndex(), Jobs: c.jobs.Len(), Queues: c.jobs.Queues(), Limits: c.jobs.Limits(c.cfg.Clock()),
		SubmitEntries: c.sub.Entries(), SubmittedJobs: c.sub.Jobs(), WatchOldest: oldest,
		BatchHolds: c.hold.Holds(), BatchHoldsExpired: c.hold.Expired(),
	}
}
