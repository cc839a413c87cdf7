package chaos

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/internal/test/jobmodel"
)

// The model client's operations reach a member as the model judges them:
// an ack's result and a nak's error are sent (a nak under an ended lease
// with another error is refused stale, as the model requires; the same nak
// again is a repeat), and a get of a succeeded job reports the result its
// ack recorded. The history of a real member's answers, through the
// workload's request and output mappings, is linearizable.
func TestModelOperationsReachTheMemberAsTheModelJudgesThem(t *testing.T) {
	c := clustertest.StartCtls(t, 1, nil)
	c.WaitLeader(30 * time.Second)
	srv := httptest.NewServer(clustertest.Handler(c.Ctls[0]))
	defer srv.Close()

	rec := jobmodel.NewRecorder()
	var token uint64
	do := func(in jobmodel.Input, want jobmodel.Outcome) jobmodel.Output {
		t.Helper()
		req := modelRequest(0, in, 0)
		req.Timeout = 10 * time.Second
		body, _ := json.Marshal(req)
		call := rec.Now()
		resp, err := http.Post(srv.URL+"/"+in.Kind.String(), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		var rep clustertest.Reply
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%v: decode: %v", in, err)
		}
		out := modelOutput(in, rep.Outcome, rep)
		if out.Outcome != want {
			t.Errorf("%s: outcome %s (%s), want %s", jobmodel.Model.DescribeOperation(in, out), out.Outcome, rep.Error, want)
		}
		rec.Add(0, in, out, call)
		return out
	}
	job := "mj-0"
	nak := func(err string) jobmodel.Input {
		return jobmodel.Input{Kind: jobmodel.Nak, Job: job, Token: token, Result: err}
	}
	ack := func(res string) jobmodel.Input {
		return jobmodel.Input{Kind: jobmodel.Ack, Job: job, Token: token, Result: res}
	}
	claim := func() {
		t.Helper()
		if token = do(jobmodel.Input{Kind: jobmodel.Claim, Job: job}, jobmodel.OK).Token; token == 0 {
			t.Fatalf("claim of the pending %s found nothing", job)
		}
	}

	do(jobmodel.Input{Kind: jobmodel.Submit, Job: job}, jobmodel.OK)
	claim()
	do(nak("e0"), jobmodel.OK)
	do(nak("e0"), jobmodel.OK)    // the request that ended the lease: a repeat
	do(nak("e1"), jobmodel.Stale) // another request under the ended lease
	claim()
	do(ack("r1"), jobmodel.OK)
	do(ack("r1"), jobmodel.OK)
	do(ack("r0"), jobmodel.Stale)
	do(nak("e0"), jobmodel.Stale)
	if out := do(jobmodel.Input{Kind: jobmodel.Get, Job: job}, jobmodel.OK); out.State != jobmodel.Succeeded || out.Result != "r1" {
		t.Errorf("get: %s %q, want %s %q", out.State, out.Result, jobmodel.Succeeded, "r1")
	}
	if res, _ := jobmodel.Check(rec.Ops(), 10*time.Second); res != porcupine.Ok {
		t.Errorf("the member's answers through the workload's mappings: %v, want linearizable", res)
	}
}
