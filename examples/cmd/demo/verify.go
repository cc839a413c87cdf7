package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/examples/internal/cluster"
	"github.com/jobraft/jobraft/walcompare"
)

// execution is the record every jobd handler acks a job with.
type execution struct {
	Job     string `json:"job"`
	Member  string `json:"member"`
	Attempt uint32 `json:"attempt"`
	Handler string `json:"handler"`
	SHA256  string `json:"sha256"`
}

// verifyResults lists every job (linearizable) and checks each succeeded
// once with its own execution record and the right output.
func verifyResults(ctx context.Context, cfg config, c *cluster.Cluster, sum *summary) error {
	var jobs []client.Job
	var err error
	for i, m := range c.Members {
		if !c.Running(i) {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		jobs, err = m.Client.ListAll(lctx, queue, "succeeded")
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	sum.PerMember = map[string]int{}
	seen := map[string]bool{}
	var bad []string
	for _, j := range jobs {
		var e execution
		if err := json.Unmarshal(j.Result, &e); err != nil {
			bad = append(bad, j.ID+": result is not an execution record")
			continue
		}
		var i int
		if _, err := fmt.Sscanf(j.ID, "demo-%06d", &i); err != nil || j.ID != jobID(i) || i >= cfg.Jobs {
			bad = append(bad, j.ID+": not a demo job")
			continue
		}
		want := sha256.Sum256([]byte(payload(i)))
		switch {
		case seen[j.ID]:
			bad = append(bad, j.ID+": listed twice")
		case e.Job != j.ID:
			bad = append(bad, fmt.Sprintf("%s: result of job %q", j.ID, e.Job))
		case e.SHA256 != hex.EncodeToString(want[:]):
			bad = append(bad, j.ID+": wrong sha256")
		case e.Attempt != j.Attempts:
			bad = append(bad, fmt.Sprintf("%s: acked by attempt %d, job at attempt %d", j.ID, e.Attempt, j.Attempts))
		}
		seen[j.ID] = true
		sum.PerMember[e.Member]++
		if j.Attempts > 1 {
			sum.Reruns++
		}
	}
	missing := 0
	for i := 0; i < cfg.Jobs; i++ {
		if !seen[jobID(i)] {
			missing++
		}
	}
	detail := fmt.Sprintf("%d/%d jobs succeeded, each with one execution record carrying its own id and the right sha256", len(seen), cfg.Jobs)
	if missing > 0 || len(bad) > 0 {
		detail = fmt.Sprintf("%d missing, %d bad (first: %v)", missing, len(bad), first(bad))
	}
	sum.check("every job completed, with its own result", missing == 0 && len(bad) == 0 && len(jobs) == cfg.Jobs, detail)
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// verifyAcks counts the committed "acked" events per job from a member that
// was never killed (it retains every event since index 1): exactly one each.
func verifyAcks(ctx context.Context, cfg config, c *cluster.Cluster, killed int, sum *summary) error {
	w := 0
	if w == killed {
		w = 1
	}
	acks := map[string]int{}
	total := 0
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	idle := time.AfterFunc(time.Hour, cancel)
	defer idle.Stop()
	err := c.Members[w].Client.Watch(wctx, client.WatchRequest{From: 1, Queues: []string{queue}, Events: []string{"acked"}}, func(ev client.Event) error {
		acks[ev.JobID]++
		total++
		if len(acks) == cfg.Jobs {
			// Every job seen acked: read on until the stream stays quiet
			// for a second, so a second ack of any job would be counted.
			idle.Reset(time.Second)
		}
		return nil
	})
	if err != nil && !errors.Is(wctx.Err(), context.Canceled) {
		if ctx.Err() == nil && wctx.Err() == nil {
			sum.check("acked exactly once (watch)", false, fmt.Sprintf("watch on %s: %v", c.Members[w].ID, err))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	twice := 0
	for _, n := range acks {
		if n > 1 {
			twice++
		}
	}
	ok := len(acks) == cfg.Jobs && total == cfg.Jobs && twice == 0
	sum.check("acked exactly once (committed events, watched on "+c.Members[w].ID+")", ok,
		fmt.Sprintf("%d ack events for %d distinct jobs, %d acked more than once", total, len(acks), twice))
	return nil
}

// compareLogs runs walcompare over the stopped members' data dirs, with the
// library (the check) and the CLI (its table is saved next to the logs).
func compareLogs(ctx context.Context, c *cluster.Cluster, sum *summary) error {
	var members []walcompare.Member
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	var dirs []string
	for _, m := range c.Members {
		wm, err := walcompare.OpenDir(m.ID, m.DataDir)
		if err != nil {
			return err
		}
		members = append(members, wm)
		dirs = append(dirs, m.DataDir)
	}
	rep, err := walcompare.Compare(ctx, members, walcompare.Options{})
	if err != nil {
		return err
	}
	sum.Walcompare = rep
	sum.check("walcompare: committed divergences = 0", rep.CommittedCount == 0 && !rep.OverClaimed,
		fmt.Sprintf("indexes %d..%d, committed boundary %d (%s), %d committed divergences, %d in all",
			rep.From, rep.To, rep.Committed, rep.CommittedBasis, rep.CommittedCount, len(rep.Divergences)))
	out := filepath.Join(c.Opts.Dir, "walcompare.txt")
	cmd := exec.CommandContext(ctx, c.WalCmp, dirs...)
	b, cerr := cmd.CombinedOutput()
	if werr := os.WriteFile(out, b, 0o644); werr != nil {
		return werr
	}
	sum.check("walcompare CLI exits 0", cerr == nil, "table in "+out)
	return nil
}

// check is one verified property.
type check struct {
	Name   string
	OK     bool
	Detail string
}

// summary is what the demo prints.
type summary struct {
	Dir        string
	Jobs       int
	TLS        bool
	SubmitDur  time.Duration
	TotalDur   time.Duration
	Duplicates int
	Reruns     int
	Failover   *failoverResult
	Members    []client.Status
	PerMember  map[string]int
	Walcompare *walcompare.Report
	Checks     []check
	c          *cluster.Cluster
}

func (s *summary) check(name string, ok bool, detail string) {
	s.Checks = append(s.Checks, check{name, ok, detail})
}

// OK reports whether every check held (and there was at least one).
func (s *summary) OK() bool {
	if len(s.Checks) == 0 {
		return false
	}
	for _, c := range s.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

func (s *summary) print(w *os.File, runErr error) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n== jobraft demo summary ==\n")
	p("jobs                 %d (queue %q, kind sha256)\n", s.Jobs, queue)
	if s.SubmitDur > 0 {
		p("submit               %v  (%.0f jobs/s accepted)\n", s.SubmitDur.Round(time.Millisecond), float64(s.Jobs)/s.SubmitDur.Seconds())
	}
	if s.TotalDur > 0 {
		p("submit -> all done   %v  (%.0f jobs/s end to end)\n", s.TotalDur.Round(time.Millisecond), float64(s.Jobs)/s.TotalDur.Seconds())
	}
	if f := s.Failover; f != nil {
		p("failover             SIGKILLed leader %s (term %d) -> new leader %s (term %d) in %v; %s ready again %v after restart\n",
			f.Killed, f.OldTerm, f.NewLeader, f.NewTerm, f.Failover.Round(time.Millisecond), f.Killed, f.Rejoin.Round(time.Millisecond))
	}
	p("resubmits answered   %d duplicates (same id: exactly-once submit)\n", s.Duplicates)
	p("jobs run more than once (lease lost in the kill, at-least-once execution): %d\n", s.Reruns)
	if len(s.PerMember) > 0 {
		ids := make([]string, 0, len(s.PerMember))
		for id := range s.PerMember {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		p("completions by member")
		for _, id := range ids {
			p("  %s=%d", id, s.PerMember[id])
		}
		p("\n")
	}
	for _, m := range s.Members {
		p("member %-3s           applied %-7d commit %-7d last %-7d digest %s\n", m.ID, m.AppliedIndex, m.CommitIndex, m.LastIndex, short(m.Digest))
	}
	if r := s.Walcompare; r != nil {
		p("walcompare           mode %s, indexes %d..%d, committed %d (%s), summary %v\n", r.Mode, r.From, r.To, r.Committed, r.CommittedBasis, r.Summary)
	}
	p("checks:\n")
	for _, c := range s.Checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		p("  %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	if runErr != nil {
		p("  FAIL  run: %v\n", runErr)
	}
	p("data and logs kept in %s (n1/ n2/ n3/ data dirs, n*.log member logs, walcompare.txt, certs/, token)\n", s.Dir)
	if s.OK() && runErr == nil {
		p("RESULT: PASS\n")
	} else {
		p("RESULT: FAIL\n")
	}
}
