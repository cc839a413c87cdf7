package client

import (
	"context"
	"net/url"
	"time"
)

// ClaimRequest asks for up to Max jobs of Queues for Worker; Wait
// long-polls (at most 60s) when none is claimable.
type ClaimRequest struct {
	Queues   []string `json:"queues"`
	Worker   string   `json:"worker"`
	Max      int      `json:"max,omitempty"`
	LeaseTTL Duration `json:"lease_ttl,omitempty"`
	Wait     Duration `json:"wait,omitempty"`
}

// Claimed is one leased job: settle it with Ack, Nak, Extend or Term
// giving its Token.
type Claimed struct {
	Job      Job       `json:"job"`
	Token    uint64    `json:"token"`
	Deadline time.Time `json:"deadline"`
}

// Claim leases jobs. It is never resent after an unknown outcome
// (ErrOutcomeUnknown): jobs leased by a lost claim return to their queue
// when their leases expire.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) ([]Claimed, error) {
	var out struct {
		Leases []Claimed `json:"leases"`
	}
	err := c.do(ctx, &call{method: "POST", path: "/v1/claim", in: r, out: &out, mutates: true, stream: r.Wait > 0})
	return out.Leases, err
}

// Ack completes a leased job with a result.
func (c *Client) Ack(ctx context.Context, id string, token uint64, result []byte) error {
	return c.settle(ctx, id, "ack", map[string]any{"token": token, "result": result})
}

// Nak fails the attempt; the job is retried after delay (or dead when out
// of attempts). errText is recorded as the job's last error.
func (c *Client) Nak(ctx context.Context, id string, token uint64, delay time.Duration, errText string) error {
	return c.settle(ctx, id, "nak", map[string]any{"token": token, "delay": Duration(delay), "error": errText})
}

// Extend renews the lease for another TTL.
func (c *Client) Extend(ctx context.Context, id string, token uint64) error {
	return c.settle(ctx, id, "extend", map[string]any{"token": token})
}

// Term ends the job as dead, without further attempts.
func (c *Client) Term(ctx context.Context, id string, token uint64, reason string) error {
	return c.settle(ctx, id, "term", map[string]any{"token": token, "reason": reason})
}

// settle resends with the same token after an unknown outcome; a refused
// resend means the lease ended, by the first attempt or otherwise: that is
// ErrOutcomeUnknown (Get the job to see its state).
func (c *Client) settle(ctx context.Context, id, op string, body map[string]any) error {
	return c.resend(ctx, &call{method: "POST", path: "/v1/jobs/" + url.PathEscape(id) + "/" + op, in: body, mutates: true},
		func() (bool, error) { return false, nil })
}
