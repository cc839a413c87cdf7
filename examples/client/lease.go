package client

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// Claim leases jobs. It is never resent after an unknown outcome
// (ErrOutcomeUnknown): jobs leased by a lost claim return to their queue
// when their leases expire.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) ([]Claimed, error) {
	var out ClaimReply
	err := c.do(ctx, &call{method: "POST", path: "/v1/claim", in: r, out: &out, mutates: true, stream: r.Wait > 0})
	return out.Leases, err
}

// Ack completes a leased job with a result. nil means this ack (this
// token, this result) ended the lease: another ack of the lease with
// another result, say a second worker's, is refused (ErrRefused, 409
// stale_lease), the reason saying how the lease ended.
func (c *Client) Ack(ctx context.Context, id string, token uint64, result []byte) error {
	return c.settle(ctx, id, "ack", SettleRequest{Token: token, Result: result})
}

// Nak fails the attempt; the job is retried after delay (or dead when out
// of attempts). errText is recorded as the job's last error.
func (c *Client) Nak(ctx context.Context, id string, token uint64, delay time.Duration, errText string) error {
	return c.settle(ctx, id, "nak", SettleRequest{Token: token, Delay: Duration(delay), Error: errText})
}

// Extend renews the lease for another TTL.
func (c *Client) Extend(ctx context.Context, id string, token uint64) error {
	return c.settle(ctx, id, "extend", SettleRequest{Token: token})
}

// Term ends the job as dead, without further attempts.
func (c *Client) Term(ctx context.Context, id string, token uint64, reason string) error {
	return c.settle(ctx, id, "term", SettleRequest{Token: token, Reason: reason})
}

// settle resends the same request after an unknown outcome: a 200 is a
// repeat of this very request (jobd answers a repeat only when it is the
// same request) or its first success; a refused resend means the lease
// ended, by the first attempt (whose end the job may have forgotten since:
// a later lease of the job ended) or otherwise: that is ErrOutcomeUnknown
// (Get the job to see its state).
func (c *Client) settle(ctx context.Context, id, op string, body SettleRequest) error {
	_, err := c.Settle(ctx, id, op, body)
	return err
}

// Settle sends op ("ack", "nak", "extend" or "term") with body for job id,
// resending as Ack, Nak, Extend and Term do, and returns jobd's reply: the
// job's state read after it and, after extend, the lease's new deadline.
func (c *Client) Settle(ctx context.Context, id, op string, body SettleRequest) (Settled, error) {
	var out Settled
	switch op {
	case "ack", "nak", "extend", "term":
	default:
		return out, fmt.Errorf("jobd: settle: unknown operation %q (ack, nak, extend, term)", op)
	}
	err := c.resend(ctx, &call{method: "POST", path: "/v1/jobs/" + url.PathEscape(id) + "/" + op, in: body, out: &out, mutates: true},
		func() (bool, error) { return false, nil })
	return out, err
}
