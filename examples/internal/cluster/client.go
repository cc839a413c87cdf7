package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client speaks jobd's HTTP API.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client for the API at base (http://host:port).
func NewClient(base, token string) *Client {
	return &Client{Base: base, Token: token, HTTP: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12},
	}}}
}

// APIError is a non-2xx reply.
type APIError struct {
	Code   int
	Kind   string `json:"error"`
	Reason string `json:"reason"`
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Code, e.Kind, e.Reason) }

// Do sends a JSON request and decodes a 2xx reply into out (if non-nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Code: resp.StatusCode}
		if json.Unmarshal(b, e) != nil {
			e.Reason = strings.TrimSpace(string(b))
		}
		return e
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Status is the part of a member's status the harness reads.
type Status struct {
	ID           string `json:"id"`
	Role         string `json:"role"`
	Term         uint64 `json:"term"`
	LeaderID     string `json:"leader_id"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
	DigestIndex  uint64 `json:"digest_index"`
	Ready        bool   `json:"ready"`
}

// Status returns the member's own status (fast: no RPCs to peers).
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out struct {
		Self Status `json:"self"`
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := c.Do(ctx, "GET", "/v1/cluster/status?members=0", nil, &out)
	return out.Self, err
}

// NewJob is one job to submit.
type NewJob struct {
	ID          string `json:"id"`
	Queue       string `json:"queue"`
	Kind        string `json:"kind"`
	PayloadText string `json:"payload_text"`
}

// SubmitResult is one job's outcome in a batch.
type SubmitResult struct {
	Job       Job    `json:"job"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
	Reason    string `json:"reason"`
}

// SubmitBatch submits jobs; per-job errors are in the results.
func (c *Client) SubmitBatch(ctx context.Context, jobs []NewJob) ([]SubmitResult, error) {
	var out struct {
		Results []SubmitResult `json:"results"`
	}
	err := c.Do(ctx, "POST", "/v1/jobs/batch", map[string]any{"jobs": jobs}, &out)
	return out.Results, err
}

// Job is the part of a job the harness reads.
type Job struct {
	ID       string `json:"id"`
	Queue    string `json:"queue"`
	Kind     string `json:"kind"`
	Payload  []byte `json:"payload"`
	State    string `json:"state"`
	Attempts uint32 `json:"attempts"`
	Result   []byte `json:"result"`
}

// List returns every job of queue in state (linearizable), paging through.
func (c *Client) List(ctx context.Context, queue, state string) ([]Job, error) {
	var all []Job
	cursor := ""
	for {
		var page struct {
			Jobs []Job  `json:"jobs"`
			Next string `json:"next"`
		}
		q := url.Values{"queue": {queue}, "state": {state}, "limit": {"1000"}, "cursor": {cursor}}
		if err := c.Do(ctx, "GET", "/v1/jobs?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all, nil
		}
		cursor = page.Next
	}
}

// Counts returns the queue's job counts by state (linearizable).
func (c *Client) Counts(ctx context.Context, queue string) (map[string]int, error) {
	var st struct {
		Queues []struct {
			Name   string         `json:"name"`
			Counts map[string]int `json:"counts"`
		} `json:"queues"`
	}
	if err := c.Do(ctx, "GET", "/v1/stats", nil, &st); err != nil {
		return nil, err
	}
	for _, q := range st.Queues {
		if q.Name == queue {
			return q.Counts, nil
		}
	}
	return map[string]int{}, nil
}

// Event is one watch event.
type Event struct {
	Index  uint64 `json:"index"`
	Kind   string `json:"kind"`
	JobID  string `json:"job"`
	Worker string `json:"worker"`
	Error  string `json:"error"`
}

// Watch streams events from index from until fn returns false, the stream
// ends, or ctx ends.
func (c *Client) Watch(ctx context.Context, from uint64, query string, fn func(Event) bool) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/watch?from=%d&%s", c.Base, from, query), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return &APIError{Code: resp.StatusCode, Reason: string(b)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return err
		}
		if ev.Kind == "error" {
			return fmt.Errorf("watch ended: %s", ev.Error)
		}
		if !fn(ev) {
			return nil
		}
	}
	return sc.Err()
}
