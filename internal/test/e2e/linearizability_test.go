package e2e_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/jobmodel"
)

func modelOutcome(rep clustertest.Reply, err error) jobmodel.Outcome {
	if err != nil {
		return jobmodel.Unknown // no reply: the member died or the call timed out
	}
	switch rep.Outcome {
	case clustertest.OutcomeOK:
		return jobmodel.OK
	case clustertest.OutcomeNotSubmitted, clustertest.OutcomeError:
		return jobmodel.NotDone
	case clustertest.OutcomeStale:
		return jobmodel.Stale
	}
	return jobmodel.Unknown
}

// Clients submit, claim, ack, nak and read jobs on random members while the
// leader process is SIGKILLed and restarted; the recorded history (with
// unknown outcomes) must be linearizable against jobmodel. Then the same
// history with one injected violation must be refused: the check can fail.
func TestLinearizableUnderLeaderKills(t *testing.T) {
	rng := rand.New(rand.NewSource(seed(t)))
	p := clustertest.StartCtlProcs(t, 3, nil)
	p.WaitLeader(wait)
	rec := jobmodel.NewRecorder()
	const jobs, clients = 8, 5
	rounds := 2
	if *longFlag {
		rounds = 6
	}
	var mu sync.Mutex
	alive := [3]bool{true, true, true}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var nops sync.WaitGroup
	for c := 0; c < clients; c++ {
		crng := rand.New(rand.NewSource(rng.Int63()))
		wg.Add(1)
		nops.Add(1)
		go func() {
			defer wg.Done()
			tokens := map[string][]uint64{} // tokens this client got, per job
			for n := 0; ; n++ {
				if n == 40 {
					nops.Done()
				}
				select {
				case <-stop:
					if n < 40 {
						nops.Done()
					}
					return
				default:
				}
				mu.Lock()
				m := crng.Intn(3)
				for !alive[m] {
					m = (m + 1) % 3
				}
				mu.Unlock()
				in, k := jobmodel.NextInput(crng.Intn, jobs, "lj", tokens)
				id, queue, path := in.Job, fmt.Sprintf("lq-%d", k), "/"+in.Kind.String()
				req := clustertest.Request{ID: id, Queue: queue, Worker: fmt.Sprintf("c%d", c), TTL: time.Minute, MaxAttempts: 10000, Token: in.Token, Result: in.Result}
				call := rec.Now()
				rep, err := p.CallT(m, path, req, 3*time.Second)
				if err == nil && rep.Outcome == clustertest.OutcomeAmbiguous {
					t.Errorf("%s %s: an error of no single outcome class: %s", path, id, rep.Error)
				}
				out := jobmodel.Output{Outcome: modelOutcome(rep, err)}
				switch in.Kind {
				case jobmodel.Claim:
					if out.Outcome == jobmodel.OK && len(rep.Jobs) == 1 {
						out.Token = rep.Jobs[0].Token
						tokens[id] = append(tokens[id], out.Token)
					}
				case jobmodel.Get:
					if out.Outcome != jobmodel.OK {
						continue // a failed read has no effect: leave it out
					}
					out.State = jobmodel.Absent
					if rep.Job != nil {
						out.State, out.Token = jobmodel.GetState(rep.Job.State), rep.Job.Token
						if out.State == jobmodel.Succeeded {
							out.Result = rep.Job.Result
						}
					}
				}
				rec.Add(c, in, out, call)
			}
		}()
	}
	nops.Wait()
	for r := 0; r < rounds; r++ {
		l := p.WaitLeader(wait)
		mu.Lock()
		alive[l] = false
		mu.Unlock()
		p.Kill(l)
		p.WaitLeader(wait)
		before := len(rec.Ops())
		clustertest.WaitFor(t, wait, "operations under the new leader", func() bool { return len(rec.Ops()) >= before+60 })
		p.Start(l)
		mu.Lock()
		alive[l] = true
		mu.Unlock()
		t.Logf("round %d: killed leader p%d", r, l)
		p.RequireApplied(false)
	}
	close(stop)
	wg.Wait()
	p.WaitLeader(wait)
	p.WaitConverged(wait)
	p.RequireApplied(true)
	ops := rec.Ops()
	tally := map[string]int{}
	for _, op := range ops {
		tally[op.Input.(jobmodel.Input).Kind.String()+"/"+op.Output.(jobmodel.Output).Outcome.String()]++
	}
	t.Logf("%d operations: %v", len(ops), tally)
	res, info := jobmodel.Check(ops, time.Minute)
	if res != porcupine.Ok {
		writeViz(t, info)
		dumpIllegal(t, ops)
		t.Fatalf("history is %s", res)
	}

	// Inject a violation: a read after everything that says a job whose
	// submit succeeded does not exist.
	var victim string
	var end int64
	for _, op := range ops {
		in, out := op.Input.(jobmodel.Input), op.Output.(jobmodel.Output)
		if in.Kind == jobmodel.Submit && out.Outcome == jobmodel.OK {
			victim = in.Job
		}
		if op.Return != int64(^uint64(0)>>1) {
			end = max(end, op.Return)
		}
	}
	if victim == "" {
		t.Fatal("no submit succeeded")
	}
	bad := append(ops, porcupine.Operation{ClientId: clients, Input: jobmodel.Input{Kind: jobmodel.Get, Job: victim},
		Output: jobmodel.Output{Outcome: jobmodel.OK, State: jobmodel.Absent}, Call: end + 1, Return: end + 2})
	if res, _ := jobmodel.Check(bad, time.Minute); res != porcupine.Illegal {
		t.Fatalf("history with a lost job checked %s, want illegal", res)
	}
}

// writeViz writes porcupine's visualization of a checked history where it
// outlives the test (t.TempDir is removed when the test ends, failed or
// not): under $JOBRAFT_ARTIFACTS if set, else under os.TempDir()'s
// jobraft-artifacts, in a new directory named after the test. It logs and
// returns the file's path ("" when it could not be written, with why).
func writeViz(t *testing.T, info porcupine.LinearizationInfo) string {
	t.Helper()
	base := os.Getenv("JOBRAFT_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "jobraft-artifacts")
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	var dir string
	err := os.MkdirAll(base, 0o755)
	if err == nil {
		dir, err = os.MkdirTemp(base, name+"-*")
	}
	if err != nil {
		t.Logf("visualization not written: %v", err)
		return ""
	}
	path := filepath.Join(dir, "history.html")
	if err := porcupine.VisualizePath(jobmodel.Model.ToModel(), info, path); err != nil {
		t.Logf("visualization not written: %v", err)
		return ""
	}
	t.Logf("visualization of the history: %s", path)
	return path
}

// TestVisualizationOutlivesTheTest: the visualization of a failing history
// is still on disk after the test that wrote it ended (it used to go to
// t.TempDir, removed at the end of the very test that failed).
func TestVisualizationOutlivesTheTest(t *testing.T) {
	artifacts := t.TempDir()
	t.Setenv("JOBRAFT_ARTIFACTS", artifacts)
	// A submit acknowledged, then a read that does not find the job.
	ops := []porcupine.Operation{
		{ClientId: 0, Input: jobmodel.Input{Kind: jobmodel.Submit, Job: "j"}, Output: jobmodel.Output{Outcome: jobmodel.OK}, Call: 1, Return: 2},
		{ClientId: 1, Input: jobmodel.Input{Kind: jobmodel.Get, Job: "j"}, Output: jobmodel.Output{Outcome: jobmodel.OK, State: jobmodel.Absent}, Call: 3, Return: 4},
	}
	res, info := jobmodel.Check(ops, time.Minute)
	if res != porcupine.Illegal {
		t.Fatalf("history checked %s, want illegal", res)
	}
	var path string
	t.Run("failing", func(t *testing.T) { path = writeViz(t, info) })
	if path == "" || !strings.HasPrefix(path, artifacts+string(filepath.Separator)) {
		t.Fatalf("visualization at %q, want under $JOBRAFT_ARTIFACTS %s", path, artifacts)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("visualization gone after the test that wrote it: %v", err)
	}
}

// dumpIllegal logs the operations of the jobs whose history is not
// linearizable, in call order.
func dumpIllegal(t *testing.T, ops []porcupine.Operation) {
	for _, part := range jobmodel.Model.Partition(ops) {
		if res, _ := jobmodel.Check(part, 10*time.Second); res == porcupine.Ok {
			continue
		}
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		for _, op := range part {
			ret := "never"
			if op.Return != int64(^uint64(0)>>1) {
				ret = fmt.Sprint(time.Duration(op.Return))
			}
			t.Logf("c%d [%v, %s] %s", op.ClientId, time.Duration(op.Call), ret, jobmodel.Model.DescribeOperation(op.Input, op.Output))
		}
	}
}
