package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
)

// EnvCtl carries a controller child member's MemberConfig (JSON):
// it makes the test binary a controller member process (CtlProcs).
const EnvCtl = "JOBRAFT_CLUSTERTEST_CTL"

// MemberConfig is what a child member process runs.
type MemberConfig struct {
	ID       string        `json:"id"`
	DataDir  string        `json:"data_dir"`
	RaftAddr string        `json:"raft_addr"`
	HTTPAddr string        `json:"http_addr"`
	Members  []raft.Member `json:"members"`
	// ClockOffset skews the member's clock (raft.Config.Clock).
	ClockOffset    time.Duration `json:"clock_offset"`
	LeaseTTL       time.Duration `json:"lease_ttl"`
	ExpireInterval time.Duration `json:"expire_interval"`
	// Timing overrides the test timing (200 ms heartbeat and election,
	// 150 ms leader lease, 3 s propose timeout) where set.
	Timing Timing `json:"timing"`
	// Faults routes the member's raft traffic through its own fault network
	// and its log through a wal.FaultFS, both set over POST /faults (see
	// FaultSpec): the chaos harness pushes the same network rules to every
	// member.
	Faults bool `json:"faults,omitempty"`
	// Snapshots makes the member snapshot often (every 256 entries,
	// checked every 500ms, keeping 128): lagging members catch up by
	// snapshot install. Off: no snapshot within a test.
	Snapshots bool `json:"snapshots,omitempty"`
	// ElectionTimeout, when set, is the member's heartbeat and election
	// timeout (default 200ms).
	ElectionTimeout time.Duration `json:"election_timeout,omitempty"`
	// Join starts the member empty and not bootstrapped (Members unused):
	// a member for a running cluster to add (StartJoiner).
	Join bool `json:"join,omitempty"`
}

// Timing is a member's raft timing, propose timeout and leader wait; zero fields keep
// the test timing.
type Timing struct {
	Heartbeat      time.Duration `json:"heartbeat,omitempty"`
	Election       time.Duration `json:"election,omitempty"`
	LeaderLease    time.Duration `json:"leader_lease,omitempty"`
	ProposeTimeout time.Duration `json:"propose_timeout,omitempty"`
	LeaderWait     time.Duration `json:"leader_wait,omitempty"`
}

// apply sets the timing's non-zero fields in cfg.
func (tm Timing) apply(cfg *jobraft.Config) {
	set := func(d *time.Duration, v time.Duration) {
		if v != 0 {
			*d = v
		}
	}
	set(&cfg.HeartbeatTimeout, tm.Heartbeat)
	set(&cfg.ElectionTimeout, tm.Election)
	set(&cfg.LeaderLeaseTimeout, tm.LeaderLease)
	set(&cfg.ProposeTimeout, tm.ProposeTimeout)
	set(&cfg.LeaderWait, tm.LeaderWait)
}

// runCtlChild runs a controller member when the process was started as
// one (by CtlProcs) and never returns then; otherwise it returns at once.
func runCtlChild() {
	spec := os.Getenv(EnvCtl)
	if spec == "" {
		return
	}
	var mc MemberConfig
	if err := json.Unmarshal([]byte(spec), &mc); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest member:", err)
		os.Exit(2)
	}
	if err := runMember(mc); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest member:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runMember(mc MemberConfig) error {
	et := mc.ElectionTimeout
	if et <= 0 {
		et = 200 * time.Millisecond
	}
	cfg := jobraft.Config{
		Config: raft.Config{
			ID: mc.ID, DataDir: mc.DataDir, BindAddr: mc.RaftAddr, Bootstrap: true, InitialMembers: mc.Members,
			HeartbeatTimeout: et, ElectionTimeout: et,
			LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 2 * time.Millisecond,
			SnapshotInterval: time.Hour, SnapshotThreshold: 1 << 30, ApplyTimeout: 2 * time.Second,
			Logger: hclog.New(&hclog.LoggerOptions{Name: mc.ID, Level: hclog.Warn, Output: os.Stderr}),
		},
		LeaseTTL: mc.LeaseTTL, ExpireInterval: mc.ExpireInterval,
		ClaimPollInterval: 200 * time.Millisecond, ProposeTimeout: 3 * time.Second,
	}
	mc.Timing.apply(&cfg)
	if mc.Join {
		cfg.Bootstrap, cfg.InitialMembers = false, nil
	}
	stalltest.Watch() // the member's own stalls, for /status and /stall
	if mc.Snapshots {
		cfg.SnapshotInterval, cfg.SnapshotThreshold, cfg.TrailingLogs = 500*time.Millisecond, 256, 128
	}
	if mc.ClockOffset != 0 {
		cfg.Clock = func() time.Time { return time.Now().Add(mc.ClockOffset) }
	}
	var faults *memberFaults
	var opts []nodeopt.Option
	if mc.Faults {
		faults = newMemberFaults(mc.DataDir)
		opts = faults.options()
	}
	applied, err := history.OpenFile(mc.ID, HistoryPath(mc.DataDir), func(err error) {
		// A hole in the history would be checked wrongly: die loudly.
		fmt.Fprintln(os.Stderr, "clustertest member:", err)
		os.Exit(4)
	})
	if err != nil {
		return err
	}
	var ctl *jobraft.Controller
	for attempt := 0; attempt < 100; attempt++ {
		if ctl, err = jobraft.Open(context.Background(), cfg, append(opts, nodeopt.Applied(applied))...); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break // only a lingering port is retried: a refusal (a damaged log) is final
		}
		time.Sleep(50 * time.Millisecond) // the port of a killed predecessor may linger
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", mc.HTTPAddr)
	for attempt := 0; err != nil && attempt < 100; attempt++ {
		time.Sleep(50 * time.Millisecond)
		ln, err = net.Listen("tcp", mc.HTTPAddr)
	}
	if err != nil {
		return err
	}
	h := Handler(ctl)
	if faults != nil {
		h = faults.handler(h)
	}
	return http.Serve(ln, h)
}

// Outcomes reported by the member API.
const (
	OutcomeOK           = "ok"
	OutcomeNotSubmitted = "not_submitted" // did not happen
	OutcomeMayExist     = "may_exist"     // submit outcome unknown
	OutcomeUnknown      = "unknown"       // other operation outcome unknown
	OutcomeStale        = "stale"
	OutcomeError        = "error" // refused: nothing happened
	// OutcomeAmbiguous: the error matched no outcome class or more than
	// one: a broken contract (tests fail on it).
	OutcomeAmbiguous = "ambiguous"
)

// Request is the body of every member API call.
type Request struct {
	ID      string        `json:"id,omitempty"`
	Queue   string        `json:"queue,omitempty"`
	Payload string        `json:"payload,omitempty"`
	Worker  string        `json:"worker,omitempty"`
	Token   uint64        `json:"token,omitempty"`
	TTL     time.Duration `json:"ttl,omitempty"`
	Wait    time.Duration `json:"wait,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
	Result  string        `json:"result,omitempty"` // /ack: the result; /nak: the error ("nak" when empty)
	Local   bool          `json:"local,omitempty"`
	// MaxAttempts of a submitted job (0: default).
	MaxAttempts uint32 `json:"max_attempts,omitempty"`
	// Payloads of the jobs of a /batch submit (IDs assigned by the
	// controller).
	Payloads []string `json:"payloads,omitempty"`
	// After: the parents of a /submit's job; Priority its priority.
	// Batch: a /create-batch's or /get-batch's batch ID (the jobs of a
	// /create-batch: Payloads, their IDs IDs, their parents Afters;
	// its completion job's payload Payload in queue Queue+"-done").
	After    []string   `json:"after,omitempty"`
	Priority int32      `json:"priority,omitempty"`
	Batch    string     `json:"batch,omitempty"`
	IDs      []string   `json:"ids,omitempty"`
	Afters   [][]string `json:"afters,omitempty"`
	// From is the raft index a /watch starts at (0: the next one).
	From uint64 `json:"from,omitempty"`
	// Addr is the raft address of the member an /add adds (ID names it).
	Addr string `json:"addr,omitempty"`
	// StallFrom and StallTo are the window of a /stall, in unix
	// nanoseconds of the machine's clock (StallTo 0: now).
	StallFrom int64 `json:"stall_from,omitempty"`
	StallTo   int64 `json:"stall_to,omitempty"`
	// Schedule is a /schedule create's definition (schedules.go).
	Schedule *ScheduleSpec `json:"schedule,omitempty"`
	// Kind, Max and Period: /limit's kind ("" the queue's) and limit;
	// /lclaim's kinds' job kind and most jobs; /usubmit's job kind and
	// unique period (limit_routes.go).
	Kind   string        `json:"kind,omitempty"`
	Max    int           `json:"max,omitempty"`
	Period time.Duration `json:"period,omitempty"`
}

// consistency is the read consistency r asks for (Local).
func (r Request) consistency() jobraft.Consistency {
	if r.Local {
		return jobraft.Local
	}
	return jobraft.Linearizable
}

// JobView is a job as the member API reports it.
type JobView struct {
	ID     string `json:"id"`
	Queue  string `json:"queue"`
	State  string `json:"state"`
	Token  uint64 `json:"token,omitempty"`
	Worker string `json:"worker,omitempty"`
	// Deadline and TTL of the lease (running jobs): Deadline is on the
	// clock of the leader that stamped the claim or extend.
	Deadline time.Time     `json:"deadline,omitempty"`
	TTL      time.Duration `json:"lease_ttl,omitempty"`
	Attempts uint32        `json:"attempts"`
	Payload  string        `json:"payload,omitempty"`
	Result   string        `json:"result,omitempty"`
	// Dependencies and batches: the job's parents, its batch, and its
	// log times of creation and of its end (zero while not ended).
	After    []string  `json:"after,omitempty"`
	Batch    string    `json:"batch,omitempty"`
	Created  time.Time `json:"created"`
	Finished time.Time `json:"finished"`
	// Kind, Seq and Unique (the job's unique key: its window and whether
	// it holds it), for the limit and unique checkers.
	Kind   string      `json:"kind,omitempty"`
	Seq    uint64      `json:"seq,omitempty"`
	Unique *UniqueView `json:"unique,omitempty"`
}

// Reply is the answer of every member API call.
type Reply struct {
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
	Job     *JobView  `json:"job,omitempty"`
	Jobs    []JobView `json:"jobs,omitempty"`
	Role    string    `json:"role,omitempty"`
	Term    uint64    `json:"term,omitempty"`
	Applied uint64    `json:"applied,omitempty"`
	Commit  uint64    `json:"commit,omitempty"`
	Leader  string    `json:"leader,omitempty"`
	// WorstStall: see /status.
	WorstStall time.Duration `json:"worst_stall,omitempty"`
	// Stall: see /stall.
	Stall *stalltest.Stall `json:"stall,omitempty"`
	// Outcomes of a /batch submit, one per requested ID.
	Outcomes []string `json:"outcomes,omitempty"`
	// NoLeader: the operation's error matched jobraft.ErrNoLeader (no
	// leader reached within Config.LeaderWait).
	NoLeader bool `json:"no_leader,omitempty"`
	// Duplicate: a /usubmit answered an existing job.
	Duplicate bool `json:"duplicate,omitempty"`
	// Events a /watch saw.
	Events []EventView `json:"events,omitempty"`
	// Last log index and the state machine's digest (/status).
	Last        uint64 `json:"last,omitempty"`
	DigestIndex uint64 `json:"digest_index,omitempty"`
	Digest      string `json:"digest,omitempty"`
	// Voters of the member's latest configuration (/status), sorted.
	Voters []string `json:"voters,omitempty"`
	// Diverged is raft.Status.Diverged (/status): the leader asked this
	// member to cut entries at or below its commit floor and its guard
	// refused; nil otherwise.
	Diverged *raft.Divergence `json:"diverged,omitempty"`
	// Batch: /get-batch's batch (nil: none).
	Batch *BatchView `json:"batch,omitempty"`
	// GuardRefusals is raft.Status.GuardRefusals (/status).
	GuardRefusals uint64 `json:"guard_refusals,omitempty"`
	// Schedule a /schedule or /schedule-get answered.
	Schedule *ScheduleView `json:"schedule,omitempty"`
}

func view(j jobraft.Job) *JobView {
	v := &JobView{ID: j.ID, Queue: j.Queue, State: j.State.String(), Attempts: j.Attempts, Payload: string(j.Payload), Result: string(j.Result),
		After: j.After, Batch: j.Batch, Created: j.Created, Finished: j.Finished, Kind: j.Kind, Seq: j.Seq}
	if u := j.Unique; u != nil {
		v.Unique = &UniqueView{Window: u.Window, Held: u.Held, States: u.States.String()}
	}
	if j.Lease != nil {
		v.Token, v.Worker, v.Deadline, v.TTL = j.Lease.Token, j.Lease.Worker, j.Lease.Deadline, j.Lease.TTL
	}
	return v
}

// Handler is the member API over ctl: POST /submit, /claim, /ack, /nak,
// /get, /list, /status, /stall with a JSON Request, answering a JSON
// Reply.
func Handler(ctl *jobraft.Controller) http.Handler {
	mux := http.NewServeMux()
	handle := func(path string, f func(ctx context.Context, r Request) Reply) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, hr *http.Request) {
			var req Request
			if err := json.NewDecoder(hr.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if req.Timeout <= 0 {
				req.Timeout = 5 * time.Second
			}
			ctx, cancel := context.WithTimeout(hr.Context(), req.Timeout)
			defer cancel()
			_ = json.NewEncoder(w).Encode(f(ctx, req))
		})
	}
	handle("/submit", func(ctx context.Context, r Request) Reply {
		j, err := ctl.Submit(ctx, jobraft.SubmitRequest{ID: r.ID, Queue: r.Queue, Kind: "k", Payload: []byte(r.Payload), MaxAttempts: r.MaxAttempts,
			After: r.After, Priority: r.Priority})
		rep := classify(err)
		if err == nil {
			rep.Job = view(j.Job)
		}
		var se *jobraft.SubmitError
		if errors.As(err, &se) {
			rep.Job = &JobView{ID: se.ID}
		}
		return rep
	})
	handle("/claim", func(ctx context.Context, r Request) Reply {
		ls, err := ctl.Claim(ctx, jobraft.ClaimRequest{Queues: []string{r.Queue}, Worker: r.Worker, LeaseTTL: r.TTL, Wait: r.Wait})
		rep := classify(err)
		for _, l := range ls {
			rep.Jobs = append(rep.Jobs, *view(l.Job))
		}
		return rep
	})
	handle("/ack", func(ctx context.Context, r Request) Reply {
		return classify(ctl.LeaseOf(jobraft.Job{ID: r.ID}, r.Token).Ack(ctx, []byte(r.Result)))
	})
	handle("/nak", func(ctx context.Context, r Request) Reply {
		msg := r.Result // the nak's error, "nak" when not given
		if msg == "" {
			msg = "nak"
		}
		return classify(ctl.LeaseOf(jobraft.Job{ID: r.ID}, r.Token).Nak(ctx, time.Nanosecond, msg))
	})
	handle("/get", func(ctx context.Context, r Request) Reply {
		j, err := ctl.Get(ctx, r.ID, r.consistency())
		if errors.Is(err, jobraft.ErrNotFound) {
			return Reply{Outcome: OutcomeOK}
		}
		if err != nil {
			return Reply{Outcome: OutcomeError, Error: err.Error(), NoLeader: errors.Is(err, jobraft.ErrNoLeader)}
		}
		return Reply{Outcome: OutcomeOK, Job: view(j)}
	})
	handle("/list", func(ctx context.Context, r Request) Reply {
		cons := r.consistency()
		var rep Reply
		page := jobraft.Page{Limit: 1000}
		for {
			p, err := ctl.List(ctx, jobraft.ListFilter{Queue: r.Queue, Consistency: cons}, page)
			if err != nil {
				return Reply{Outcome: OutcomeError, Error: err.Error()}
			}
			for _, j := range p.Jobs {
				rep.Jobs = append(rep.Jobs, *view(j))
			}
			if p.Next == "" {
				break
			}
			page.Cursor, cons = p.Next, jobraft.Local
		}
		rep.Outcome = OutcomeOK
		return rep
	})
	handle("/status", func(ctx context.Context, r Request) Reply {
		s := ctl.Node().Status()
		rep := Reply{Outcome: OutcomeOK, Role: s.Role, Term: s.Term, Applied: s.AppliedIndex, Commit: s.CommitIndex, Leader: s.LeaderID,
			Last: s.LastIndex, DigestIndex: s.Digest.Index, Digest: fmt.Sprintf("%x", s.Digest.Sum),
			Diverged: s.Diverged, GuardRefusals: s.GuardRefusals}
		for _, m := range s.Members {
			if m.Voter {
				rep.Voters = append(rep.Voters, m.ID)
			}
		}
		sort.Strings(rep.Voters)
		if r.TTL > 0 && r.Wait > 0 {
			// This process's worst stall within any TTL-long stretch of the
			// last Wait (stalltest): a liveness allowance for the caller.
			now := time.Now()
			rep.WorstStall = stalltest.Worst(now.Add(-r.Wait), now, r.TTL)
		}
		return rep
	})
	handle("/stall", func(_ context.Context, r Request) Reply {
		// This process's scheduling stalls (stalltest) within the window:
		// a liveness allowance for a caller whose operation needed this
		// member to run.
		to := time.Now()
		if r.StallTo != 0 {
			to = time.Unix(0, r.StallTo)
		}
		s := stalltest.Between(time.Unix(0, r.StallFrom), to)
		return Reply{Outcome: OutcomeOK, Stall: &s}
	})
	moreRoutes(ctl, handle, classify)
	scheduleRoutes(ctl, handle)
	depRoutes(ctl, handle, classify)
	limitRoutes(ctl, handle, classify) // limit_routes.go
	return mux
}

// classify maps an error to its outcome: a submit's by its two classes,
// any other operation's by the one outcome class it must match; NoLeader
// says whether it matched jobraft.ErrNoLeader.
func classify(err error) Reply {
	rep := classifyOutcome(err)
	rep.NoLeader = errors.Is(err, jobraft.ErrNoLeader)
	return rep
}

func classifyOutcome(err error) Reply {
	switch {
	case err == nil:
		return Reply{Outcome: OutcomeOK}
	case errors.Is(err, jobraft.ErrNotSubmitted) != errors.Is(err, jobraft.ErrMayExist):
		if errors.Is(err, jobraft.ErrNotSubmitted) {
			return Reply{Outcome: OutcomeNotSubmitted, Error: err.Error()}
		}
		return Reply{Outcome: OutcomeMayExist, Error: err.Error()}
	}
	rep := Reply{Outcome: OutcomeAmbiguous, Error: err.Error()}
	n := 0
	for _, c := range []struct {
		class   error
		outcome string
	}{
		{jobraft.ErrOutcomeUnknown, OutcomeUnknown}, {jobraft.ErrStaleLease, OutcomeStale},
		{jobraft.ErrNotApplied, OutcomeError}, {jobraft.ErrNotFound, OutcomeError},
		{jobraft.ErrInvalidState, OutcomeError}, {jobraft.ErrInvalidRequest, OutcomeError},
		{jobraft.ErrQueuePaused, OutcomeError}, {jobraft.ErrClosed, OutcomeError}, {jobraft.ErrBatchExists, OutcomeError},
		{jobraft.ErrScheduleExists, OutcomeError}, {jobraft.ErrScheduleNotFound, OutcomeError},
	} {
		if errors.Is(err, c.class) {
			n++
			rep.Outcome = c.outcome
		}
	}
	if n != 1 {
		rep.Outcome = OutcomeAmbiguous
	}
	return rep
}
