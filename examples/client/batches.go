package client

import (
	"context"
	"net/url"
	"time"
)

// BatchCreateRequest creates a batch (POST /v1/batches): its jobs, submitted in
// one entry, and the job created once every one of them ended.
type BatchCreateRequest struct {
	ID         string          `json:"id"`
	Jobs       []SubmitRequest `json:"jobs"`
	Completion *SubmitRequest  `json:"completion,omitempty"`
}

// Batch is a batch's status (GET /v1/batches/{id}).
type Batch struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	Members int       `json:"members"`
	// Counts: the members by state (a member swept counts in its last).
	Counts        map[string]int `json:"counts"`
	Succeeded     int            `json:"succeeded"`
	Failed        int            `json:"failed"`
	Done          bool           `json:"done"`
	Completed     *time.Time     `json:"completed,omitempty"`
	CompletionJob string         `json:"completion_job,omitempty"`
}

// BatchCreated is a created batch and its jobs' outcomes.
type BatchCreated struct {
	Batch   Batch       `json:"batch"`
	Results []Submitted `json:"results"`
}

// CreateBatch creates a batch. It is not resent after an unknown outcome
// by this client: jobd's library retries it, and a retry of the same
// request finds its own batch (409 batch_exists otherwise).
func (c *Client) CreateBatch(ctx context.Context, req BatchCreateRequest) (BatchCreated, error) {
	var out BatchCreated
	err := c.do(ctx, &call{method: "POST", path: "/v1/batches", in: req, out: &out, mutates: true})
	return out, err
}

// GetBatch returns a batch's status (ErrNotFound if there is none).
func (c *Client) GetBatch(ctx context.Context, id string) (Batch, error) {
	var b Batch
	err := c.do(ctx, &call{method: "GET", path: "/v1/batches/" + url.PathEscape(id), out: &b})
	return b, err
}

// Dependents returns the IDs of the jobs naming id as a parent.
func (c *Client) Dependents(ctx context.Context, id string) ([]string, error) {
	var out struct {
		Dependents []string `json:"dependents"`
	}
	err := c.do(ctx, &call{method: "GET", path: "/v1/jobs/" + url.PathEscape(id) + "/dependents", out: &out})
	return out.Dependents, err
}

// ListBatches returns every batch, in ID order.
func (c *Client) ListBatches(ctx context.Context) ([]Batch, error) {
	var all []Batch
	after := ""
	for {
		var page struct {
			Batches []Batch `json:"batches"`
		}
		path := "/v1/batches?limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if err := c.do(ctx, &call{method: "GET", path: path, out: &page}); err != nil {
			return nil, err
		}
		all = append(all, page.Batches...)
		if len(page.Batches) < 1000 {
			return all, nil
		}
		after = page.Batches[len(page.Batches)-1].ID
	}
}
