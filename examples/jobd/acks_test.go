package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// memberReply is a member's answer to one API call.
type memberReply struct {
	code int
	body map[string]any
	raw  string
}

func memberPost(hc *http.Client, base, token, path string, body any) (memberReply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return memberReply{}, err
	}
	req, err := http.NewRequest("POST", base+path, bytes.NewReader(b))
	if err != nil {
		return memberReply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return memberReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	r := memberReply{code: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r, err
}

// Two acks of one lease with different results, sent at the same instant
// to two different members of a 3-member jobd cluster (real processes):
// exactly one is 200; the other is 409 stale_lease, its reason saying the
// lease ended "acked" without quoting either result; GET shows the
// winner's result. Two identical acks are both 200 (the second repeats the
// first). Pairs: leader and follower, the two followers. (Before a repeat
// had to be the same request, both different acks were 200.)
func TestDifferentAcksOnTwoMembersHTTP(t *testing.T) {
	c := liveCluster(t)
	leader := leaderOf(t, c)
	f1, f2 := (leader+1)%3, (leader+2)%3
	base := func(i int) string { return "http://" + c.Members[i].HTTPAddr }
	hc := &http.Client{Timeout: 30 * time.Second}
	post := func(i int, path string, body any) memberReply {
		t.Helper()
		r, err := memberPost(hc, base(i), c.Token, path, body)
		if err != nil {
			t.Fatalf("POST %s on m%d: %v", path, i, err)
		}
		return r
	}
	for round, p := range [][2]int{{leader, f1}, {f1, f2}, {f2, leader}, {f1, f2}} {
		same := round == 3
		id, queue := fmt.Sprintf("acks-%d", round), fmt.Sprintf("acks-q-%d", round)
		if r := post(leader, "/v1/jobs", map[string]any{"id": id, "queue": queue, "kind": "k"}); r.code != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.code, r.raw)
		}
		r := post(p[0], "/v1/claim", map[string]any{"queues": []string{queue}, "worker": "w", "wait": "10s", "lease_ttl": "1h"})
		leases, _ := r.body["leases"].([]any)
		if r.code != http.StatusOK || len(leases) != 1 {
			t.Fatalf("claim: %d %s", r.code, r.raw)
		}
		token := leases[0].(map[string]any)["token"].(float64)
		results := [2]string{fmt.Sprintf("result-of-m%d-%d", p[0], round), fmt.Sprintf("result-of-m%d-%d", p[1], round)}
		if same {
			results[1] = results[0]
		}
		start := make(chan struct{})
		type answer struct {
			i   int
			r   memberReply
			err error
		}
		answers := make(chan answer, 2)
		for i := range p {
			go func() {
				<-start
				r, err := memberPost(hc, base(p[i]), c.Token, "/v1/jobs/"+id+"/ack", map[string]any{"token": token, "result_text": results[i]})
				answers <- answer{i, r, err}
			}()
		}
		close(start)
		var got [2]memberReply
		for range p {
			a := <-answers
			if a.err != nil {
				t.Fatalf("ack on m%d: %v", p[a.i], a.err)
			}
			got[a.i] = a.r
		}
		g, err := c.Members[p[1]].Client.Get(t.Context(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		if g.State != "succeeded" {
			t.Fatalf("round %d: job %+v, want succeeded", round, g)
		}
		for i := range got {
			if got[i].code == http.StatusOK && string(g.Result) != results[i] {
				t.Fatalf("round %d: the ack on m%d answered 200 with %q, but the job holds %q", round, p[i], results[i], g.Result)
			}
		}
		if same {
			if got[0].code != http.StatusOK || got[1].code != http.StatusOK {
				t.Fatalf("round %d: identical acks: %d %s / %d %s, want both 200", round, got[0].code, got[0].raw, got[1].code, got[1].raw)
			}
			continue
		}
		if (got[0].code == http.StatusOK) == (got[1].code == http.StatusOK) {
			t.Fatalf("round %d: different acks: %d %s / %d %s, want exactly one 200", round, got[0].code, got[0].raw, got[1].code, got[1].raw)
		}
		loser := 0
		if got[0].code == http.StatusOK {
			loser = 1
		}
		l := got[loser]
		reason, _ := l.body["reason"].(string)
		if l.code != http.StatusConflict || l.body["error"] != "stale_lease" || !strings.Contains(reason, fmt.Sprintf("lease %d ended: acked", int64(token))) {
			t.Fatalf("round %d: the losing ack on m%d: %d %s, want 409 stale_lease saying the lease ended acked", round, p[loser], l.code, l.raw)
		}
		for _, res := range results {
			if strings.Contains(l.raw, res) || strings.Contains(l.raw, base64.StdEncoding.EncodeToString([]byte(res))) {
				t.Fatalf("round %d: the 409 quotes a result: %s", round, l.raw)
			}
		}
		t.Logf("round %d: m%d won; m%d: %d %s", round, p[1-loser], p[loser], l.code, reason)
	}
}
