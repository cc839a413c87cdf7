package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
)

var commandOrder = []string{"submit", "get", "list", "watch", "cancel", "retry", "batch", "dependents", "claim", "ack", "nak", "extend", "term",
	"pause", "resume", "limit", "limit-clear", "rate", "rate-clear", "limits", "schedule-create", "schedule-list", "schedule-get",
	"schedule-pause", "schedule-resume", "schedule-delete", "stats", "members", "member-add", "member-remove", "walcompare", "backup", "verify-backup"}

// Per-command flag values (one command runs per process).
var (
	fQueue, fKind, fEvent, fID, fPayload, fPayloadFile, fKey, fState, fReason, fJob, fOut string
	fAfter, fOnParentFailure                                                              string
	fPriority                                                                             int
	fDelay                                                                                time.Duration
	fMaxAttempts                                                                          uint
	fLimit, fCount                                                                        int
	fFrom, fTo                                                                            uint64
	fAll                                                                                  bool
	fWorker, fResult, fResultFile, fError                                                 string
	fToken                                                                                uint64
	fLeaseTTL, fWait                                                                      time.Duration
	fUnique                                                                               bool
	fUniquePeriod                                                                         time.Duration
	fUniqueStates                                                                         string
)

var commands = map[string]*command{
	"submit": {args: "", help: "submit a job (retried with the same ID after an unknown outcome: exactly once)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&fQueue, "queue", "", "queue (required)")
			fs.StringVar(&fKind, "kind", "", "job kind (required)")
			fs.StringVar(&fID, "id", "", "job ID (default: a new random ID)")
			fs.StringVar(&fPayload, "payload", "", "payload text")
			fs.StringVar(&fPayloadFile, "payload-file", "", "read the payload from this file (- for stdin)")
			fs.IntVar(&fPriority, "priority", 0, "priority (higher first)")
			fs.DurationVar(&fDelay, "delay", 0, "run after this delay")
			fs.UintVar(&fMaxAttempts, "max-attempts", 0, "attempts before the job is dead (0: the cluster's default)")
			fs.StringVar(&fKey, "key", "", "idempotency key")
			fs.StringVar(&fAfter, "after", "", "parents, comma-separated: the job waits until every one succeeded")
			fs.StringVar(&fOnParentFailure, "on-parent-failure", "", "what a parent's failure does to it: cancel (default) or dead")
			uniqueFlags(fs)
		},
		run: submit},
	"get": {args: "ID", help: "show a job (linearizable read)", run: get},
	"list": {args: "", help: "list jobs: of one queue (-queue), or of every queue (list -state dead: every dead job)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&fQueue, "queue", "", "only this queue (default: every queue, queue by queue)")
			fs.StringVar(&fState, "state", "", "pending, scheduled, running, succeeded, dead or canceled (default all)")
			fs.IntVar(&fLimit, "limit", 100, "at most this many jobs")
			fs.BoolVar(&fAll, "all", false, "every job (pages through)")
		},
		run: list},
	"watch": {args: "", help: "stream committed job events (resumes on another member if one fails)", long: true,
		flags: func(fs *flag.FlagSet) {
			fs.Uint64Var(&fFrom, "from", 0, "first raft index (default: events from now on; history from the oldest retained: see stats watch_oldest)")
			fs.StringVar(&fQueue, "queue", "", "only these queues (comma-separated)")
			fs.StringVar(&fEvent, "event", "", "only these event kinds (comma-separated: submitted, claimed, acked, ...)")
			fs.StringVar(&fKind, "kind", "", "only jobs of these kinds (comma-separated)")
			fs.StringVar(&fJob, "job", "", "only this job")
			fs.IntVar(&fCount, "n", 0, "stop after this many events (0: until interrupted or -timeout)")
		},
		run: watch},
	"cancel": {args: "ID", help: "cancel a job",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&fReason, "reason", "", "why (recorded)") }, run: cancel},
	"retry":      {args: "ID", help: "move a dead or canceled job back to pending", run: retry},
	"batch":      {args: "[ID]", help: "a batch's progress and completion (every batch without ID)", run: batchCmd},
	"dependents": {args: "ID", help: "the jobs that name a job as a parent", run: dependents},
	"claim": {args: "", help: "lease jobs of a queue, as a worker does (never resent: a lost claim's leases expire)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&fQueue, "queue", "", "queues, comma-separated (required)")
			fs.StringVar(&fWorker, "worker", "", "worker name recorded in the lease (default jobctl@HOST)")
			fs.IntVar(&fCount, "max", 1, "at most this many jobs")
			fs.DurationVar(&fLeaseTTL, "lease-ttl", 0, "lease length (0: the cluster's default)")
			fs.DurationVar(&fWait, "wait", 0, "when nothing is ready, wait this long for a job (at most 60s)")
		},
		run: claim},
	"ack": {args: "ID", help: "complete a leased job with a result", flags: func(fs *flag.FlagSet) {
		tokenFlag(fs)
		fs.StringVar(&fResult, "result", "", "result text")
		fs.StringVar(&fResultFile, "result-file", "", "read the result from this file (- for stdin)")
	}, run: settle("ack")},
	"nak": {args: "ID", help: "fail a leased job's attempt: retried after -delay (or its backoff), dead when out of attempts", flags: func(fs *flag.FlagSet) {
		tokenFlag(fs)
		fs.DurationVar(&fDelay, "delay", 0, "retry after this delay (0: the job's backoff)")
		fs.StringVar(&fError, "error", "", "error text recorded as the job's last error")
	}, run: settle("nak")},
	"extend": {args: "ID", help: "renew a lease for another TTL", flags: tokenFlag, run: settle("extend")},
	"term": {args: "ID", help: "end a leased job as dead, without further attempts", flags: func(fs *flag.FlagSet) {
		tokenFlag(fs)
		fs.StringVar(&fReason, "reason", "", "why (recorded as the job's last error)")
	}, run: settle("term")},
	"pause":  {args: "QUEUE", help: "stop claims from a queue (submits are still accepted)", run: pauseResume(true)},
	"resume": {args: "QUEUE", help: "restart claims from a paused queue", run: pauseResume(false)},
	"limit": {args: "QUEUE MAX", help: "set a queue's cluster-wide concurrency limit (or a kind's, -kind): at most MAX of its jobs run at once",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&fKind, "kind", "", "limit this kind of the queue only") }, run: limitSet},
	"limit-clear": {args: "QUEUE", help: "remove a queue's concurrency limit (or a kind's, -kind)",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&fKind, "kind", "", "the kind's limit") }, run: limitClear},
	"rate": {args: "QUEUE PER-SECOND", help: "set a queue's rate: jobs per second (a token bucket on the log's time)",
		flags: func(fs *flag.FlagSet) { fs.IntVar(&fCount, "burst", 1, "at most this many at once") }, run: rateSet},
	"rate-clear":    {args: "QUEUE", help: "remove a queue's rate", run: rateClear},
	"limits":        {args: "", help: "every queue's limits, running jobs, rate tokens and the claims they held back", run: limitsCmd},
	"stats":         {args: "", help: "job counts per queue and state", run: stats},
	"members":       {args: "", help: "the members with role, term, indexes, lag, readiness and catch-up state", run: members},
	"member-add":    {args: "ID RAFT-ADDR", help: "add a member started with jobd -join: a non-voter until the catch-up policy promotes it", run: memberAdd},
	"member-remove": {args: "ID", help: "remove a member (the leader included)", run: memberRemove},
	"walcompare": {args: "", help: "compare the members' logs online; exit 8 on a committed divergence", flags: func(fs *flag.FlagSet) {
		fs.Uint64Var(&fFrom, "from", 0, "first index")
		fs.Uint64Var(&fTo, "to", 0, "last index")
	}, run: walcompare},
	"backup":        {args: "", help: "save a consistent, verified backup of the cluster's job state", long: true, flags: func(fs *flag.FlagSet) { fs.StringVar(&fOut, "o", "", "output file (required)") }, run: backupCmd},
	"verify-backup": {args: "FILE", help: "check a backup file whole (the state rebuilt to its digest); exit 8 if it is corrupt", run: verifyBackup},
}

// oneArg is the one positional argument, what; a usage error says which
// is missing or what is too much.
func oneArg(args []string, what string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usagef("missing %s", what)
	case len(args) > 1:
		return "", usagef("one argument, %s; got %d: %q", what, len(args), args)
	}
	return args[0], nil
}

// missing names the required flags not given (pairs of name and value;
// nil when all are).
func missing(flags ...string) error {
	var out []string
	for i := 0; i+1 < len(flags); i += 2 {
		if flags[i+1] == "" {
			out = append(out, flags[i])
		}
	}
	if len(out) == 0 {
		return nil
	}
	return usagef("missing %s", strings.Join(out, " and "))
}

func tokenFlag(fs *flag.FlagSet) {
	fs.Uint64Var(&fToken, "lease", 0, "the lease's token, as claim printed it (required; -token is the API's bearer token)")
}

func submit(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("submit takes no arguments (got %q); the payload is given with -payload or -payload-file", args)
	}
	if err := missing("-queue", fQueue, "-kind", fKind); err != nil {
		return err
	}
	req := client.SubmitRequest{ID: fID, Queue: fQueue, Kind: fKind, Priority: int32(fPriority), Delay: client.Duration(fDelay),
		MaxAttempts: uint32(fMaxAttempts), IdempotencyKey: fKey, OnParentFailure: fOnParentFailure}
	if fAfter != "" {
		req.After = strings.Split(fAfter, ",")
	}
	u, err := uniqueOpts() // limits.go
	if err != nil {
		return err
	}
	req.Unique = u
	if req.Payload, err = payloadFlags(); err != nil {
		return err
	}
	res, err := e.c.Submit(ctx, req)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, res)
	}
	what := "created"
	if res.Duplicate {
		what = "existed already"
	}
	fmt.Fprintf(e.out, "%s %s (queue %s, kind %s, state %s)\n", res.Job.ID, what, res.Job.Queue, res.Job.Kind, res.Job.State)
	return nil
}

// payloadFlags is the payload -payload or -payload-file gives (nil: none).
func payloadFlags() ([]byte, error) {
	switch {
	case fPayload != "" && fPayloadFile != "":
		return nil, usagef("give -payload or -payload-file, not both")
	case fPayloadFile == "-":
		return readAll(os.Stdin)
	case fPayloadFile != "":
		b, err := os.ReadFile(fPayloadFile)
		if err != nil {
			return nil, usagef("-payload-file: %v", err)
		}
		return b, nil
	case fPayload != "":
		return []byte(fPayload), nil
	}
	return nil, nil
}

func get(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the job ID")
	if err != nil {
		return err
	}
	j, err := e.c.Get(ctx, id, client.Linearizable)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, j)
	}
	t := newTable(e.out)
	t.row("id", j.ID)
	t.row("queue", j.Queue)
	t.row("kind", j.Kind)
	t.row("state", j.State)
	t.row("attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts))
	t.row("priority", j.Priority)
	t.row("payload", bytesText(j.Payload, j.PayloadText))
	if j.Lease != nil {
		t.row("lease", fmt.Sprintf("token %d, worker %s, until %s", j.Lease.Token, j.Lease.Worker, j.Lease.Deadline.Format(time.RFC3339)))
	}
	if j.LastError != "" {
		t.row("last error", j.LastError)
	}
	if j.Result != nil {
		t.row("result", bytesText(j.Result, j.ResultText))
	}
	t.row("created", j.Created.Format(time.RFC3339Nano))
	t.row("updated", j.Updated.Format(time.RFC3339Nano))
	return t.flush()
}

func list(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("list takes no arguments (got %q); a queue is given with -queue", args)
	}
	var jobs []client.Job
	var err error
	if fAll {
		jobs, err = e.c.ListAll(ctx, fQueue, fState)
	} else {
		if fLimit < 1 || fLimit > 1000 {
			return usagef("-limit in 1..1000")
		}
		var p client.JobPage
		p, err = e.c.List(ctx, client.ListRequest{Queue: fQueue, State: fState, Limit: fLimit})
		jobs = p.Jobs
	}
	if err != nil {
		return err
	}
	if e.g.json {
		if jobs == nil {
			jobs = []client.Job{}
		}
		return printJSON(e, jobs)
	}
	t := newTable(e.out)
	t.row("ID", "QUEUE", "KIND", "STATE", "ATTEMPTS", "PAYLOAD", "UPDATED")
	for _, j := range jobs {
		t.row(j.ID, j.Queue, j.Kind, j.State, j.Attempts, fmt.Sprintf("%dB", len(j.Payload)), j.Updated.Format(time.RFC3339))
	}
	return t.flush()
}

func watch(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("watch takes no arguments")
	}
	r := client.WatchRequest{From: fFrom, JobID: fJob}
	if fQueue != "" {
		r.Queues = strings.Split(fQueue, ",")
	}
	if fEvent != "" {
		r.Events = strings.Split(fEvent, ",")
	}
	if fKind != "" {
		r.JobKinds = strings.Split(fKind, ",")
	}
	n := 0
	enc := json.NewEncoder(e.out)
	return e.c.Watch(ctx, r, func(ev client.Event) error {
		if e.g.json {
			if err := enc.Encode(ev); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.out, "%d\t%s\t%s\t%s\t%s\t%s\n", ev.Index, ev.Time.Format(time.RFC3339Nano), ev.Kind, ev.JobID, ev.Queue, ev.State)
		}
		if n++; fCount > 0 && n >= fCount {
			return client.ErrStop
		}
		return nil
	})
}

func cancel(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the job ID")
	if err != nil {
		return err
	}
	j, err := e.c.Cancel(ctx, id, fReason)
	return jobLine(e, j, err, "canceled")
}

func retry(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the job ID")
	if err != nil {
		return err
	}
	j, err := e.c.Retry(ctx, id)
	return jobLine(e, j, err, "retried")
}

func jobLine(e *env, j client.Job, err error, what string) error {
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, j)
	}
	fmt.Fprintf(e.out, "%s %s (state %s)\n", j.ID, what, j.State)
	return nil
}

func pauseResume(pause bool) func(ctx context.Context, e *env, args []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		q, err := oneArg(args, "the queue")
		if err != nil {
			return err
		}
		op, what := e.c.Resume, "resumed"
		if pause {
			op, what = e.c.Pause, "paused"
		}
		if err := op(ctx, q); err != nil {
			return err
		}
		if e.g.json {
			return printJSON(e, client.QueueState{Paused: pause, Queue: q})
		}
		fmt.Fprintf(e.out, "queue %s %s\n", q, what)
		return nil
	}
}

func stats(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("stats takes no arguments")
	}
	s, err := e.c.Stats(ctx)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, s)
	}
	t := newTable(e.out)
	states := []string{"pending", "scheduled", "running", "succeeded", "dead", "canceled"}
	t.row(append([]any{"QUEUE", "PAUSED"}, upper(states)...)...)
	for _, q := range s.Queues {
		cells := []any{q.Name, q.Paused}
		for _, st := range states {
			cells = append(cells, q.Counts[st])
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%d jobs; answered by %s (%s, term %d, leader %s, applied %d)\n", s.Jobs, s.Member, s.Role, s.Term, s.Leader, s.AppliedIndex)
	for _, u := range s.Unserved {
		fmt.Fprintf(e.out, "UNSERVED: queue %s, kind %s: %d pending since %s: %s\n", u.Queue, u.Kind, u.Pending, u.Since.Format(time.RFC3339), u.Hint)
	}
	return nil
}

func members(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("members takes no arguments")
	}
	ms, err := e.c.Members(ctx)
	if err != nil {
		return err
	}
	// The cluster ID and the catch-up state come from GET
	// /v1/cluster/members (the catch-up state from the leader's policy);
	// without it the table still shows the rest.
	mem, merr := e.c.Membership(ctx)
	if e.g.json {
		return printJSON(e, struct {
			ClusterID string          `json:"cluster_id,omitempty"`
			Members   []client.Member `json:"members"`
		}{mem.ClusterID, ms})
	}
	if merr == nil {
		fmt.Fprintf(e.out, "cluster %s\n", mem.ClusterID)
	} else {
		fmt.Fprintf(e.out, "cluster ID unknown (%v)\n", merr)
	}
	catchUp := map[string]string{}
	if merr == nil {
		for _, m := range mem.Members {
			st := m.State
			if m.Reason != "" {
				st += " (" + m.Reason + ")"
			}
			catchUp[m.ID] = st
		}
	}
	state := func(id string) string {
		if s, ok := catchUp[id]; ok {
			return s
		}
		return "-"
	}
	t := newTable(e.out)
	t.row("ID", "ADDRESS", "VOTER", "ROLE", "TERM", "COMMIT", "APPLIED", "LAG", "READY", "CATCH-UP", "DIGEST")
	for _, m := range ms {
		if m.Status == nil {
			t.row(m.ID, m.Address, m.Voter, "unreachable", "-", "-", "-", "-", false, state(m.ID), m.Error)
			continue
		}
		s := m.Status
		t.row(m.ID, m.Address, m.Voter, s.Role, s.Term, s.CommitIndex, s.AppliedIndex, m.Lag, s.Ready, state(m.ID), short(s.Digest))
	}
	return t.flush()
}

func memberAdd(ctx context.Context, e *env, args []string) error {
	switch len(args) {
	case 0:
		return usagef("missing the member's ID and RAFT-ADDR")
	case 1:
		return usagef("missing the member's RAFT-ADDR (host:port of its -raft-addr)")
	case 2:
	default:
		return usagef("two arguments, ID and RAFT-ADDR; got %d: %q", len(args), args)
	}
	if err := e.c.AddMember(ctx, args[0], args[1]); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%s added as a non-voter; watch it with: jobctl members\n", args[0])
	return nil
}

func memberRemove(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the member's ID")
	if err != nil {
		return err
	}
	if err := e.c.RemoveMember(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%s removed\n", id)
	return nil
}

func walcompare(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("walcompare takes no arguments")
	}
	if fTo != 0 && fFrom > fTo {
		return usagef("-from %d is above -to %d", fFrom, fTo)
	}
	r, err := e.c.WalCompare(ctx, fFrom, fTo)
	if err != nil {
		return err
	}
	if e.g.json {
		if err := printJSON(e, r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.out, "mode %s, indexes %d..%d, committed boundary %d (%s), %d committed divergences, %d divergences in all, %d RPCs\n",
			r.Mode, r.From, r.To, r.Committed, r.CommittedBasis, r.CommittedCount, len(r.Divergences), r.Calls)
		for _, d := range r.Divergences {
			fmt.Fprintf(e.out, "  [%d, %d) %s committed=%v\n", d.Index, d.End, d.Class, d.Committed)
		}
	}
	if r.CommittedCount > 0 {
		return fmt.Errorf("%w: %d committed divergences", errCheck, r.CommittedCount)
	}
	return nil
}

func backupCmd(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("backup takes no arguments (got %q); the file is given with -o FILE", args)
	}
	if fOut == "" {
		return usagef("missing -o FILE")
	}
	start := time.Now()
	m, err := e.c.BackupToFile(ctx, fOut)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, map[string]any{"file": fOut, "manifest": m, "seconds": time.Since(start).Seconds()})
	}
	fmt.Fprintf(e.out, "backup %s: index %d, term %d, %d jobs, %d bytes, state digest %s, from %s of cluster %q, verified, %s\n",
		fOut, m.Index, m.Term, m.Jobs, m.Size, m.StateDigest, m.Member, m.ClusterID, time.Since(start).Round(time.Millisecond))
	return nil
}

func verifyBackup(_ context.Context, e *env, args []string) error {
	path, err := oneArg(args, "the backup file")
	if err != nil {
		return err
	}
	m, err := jobraft.VerifyBackup(path)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, m)
	}
	fmt.Fprintf(e.out, "%s: ok: index %d, term %d, %d jobs, state digest %s, cluster %q, taken on %s at %s\n",
		path, m.Index, m.Term, m.Jobs, m.StateDigest, m.ClusterID, m.Member, m.Created.Format(time.RFC3339))
	return nil
}

// bytesText shows a payload or result: its length and, when jobd gave it
// as text (valid UTF-8), the text (quoted, Go style, if it holds anything
// unprintable: a newline, a control character); otherwise where to see
// the bytes.
func bytesText(b []byte, text string) string {
	switch {
	case len(b) == 0:
		return "0 bytes"
	case text == "":
		return fmt.Sprintf("%d bytes, binary (-json shows them in base64)", len(b))
	}
	if strings.ContainsFunc(text, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		text = strconv.Quote(text)
	}
	return fmt.Sprintf("%d bytes: %s", len(b), text)
}

func short(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

func upper(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}
