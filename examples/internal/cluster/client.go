package cluster

import (
	"context"
	"time"

	"github.com/jobraft/jobraft/examples/client"
)

// newMemberClient is a public client bound to one member (one attempt per
// call: the harness asks members one by one on purpose).
func newMemberClient(base, token string) *client.Client {
	c, err := client.New(client.Config{Endpoints: []string{base}, Token: token, Attempts: 1})
	if err != nil {
		panic(err) // base is http://host:port, built here
	}
	return c
}

// Status returns the member's own status (fast: no RPCs to peers).
func (m *Member) Status(ctx context.Context) (client.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := m.Client.Status(ctx, "", true)
	return st.Self, err
}

// Client returns a public client over every member's API (failover across
// them).
func (c *Cluster) Client() *client.Client {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, "http://"+m.HTTPAddr)
	}
	cl, err := client.New(client.Config{Endpoints: eps, Token: c.Token})
	if err != nil {
		panic(err)
	}
	return cl
}

// Counts returns the queue's job counts by state (linearizable), asked of
// this member.
func (m *Member) Counts(ctx context.Context, queue string) (map[string]int, error) {
	st, err := m.Client.Stats(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range st.Queues {
		if q.Name == queue {
			return q.Counts, nil
		}
	}
	return map[string]int{}, nil
}

// Peers is the -peers every member is started with.
func (c *Cluster) Peers() string { return c.peers }
