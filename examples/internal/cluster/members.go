package cluster

import (
	"context"
	"time"
)

// MemberInfo is one member in GET /v1/cluster/members.
type MemberInfo struct {
	ID                     string  `json:"id"`
	Address                string  `json:"address"`
	Suffrage               string  `json:"suffrage"` // voter, nonvoter
	Role                   string  `json:"role"`
	State                  string  `json:"state"` // leader, caught_up, catching_up, stalled, diverged
	Reason                 string  `json:"reason"`
	Detail                 string  `json:"detail"`
	LastIndex              uint64  `json:"last_index"`
	Lag                    uint64  `json:"lag"`
	EntriesPerSecond       float64 `json:"entries_per_second"`
	BytesPerSecond         float64 `json:"bytes_per_second"`
	SnapshotBytesRemaining uint64  `json:"snapshot_bytes_remaining"`
	ETASeconds             float64 `json:"eta_seconds"`
}

// Membership is GET /v1/cluster/members.
type Membership struct {
	ClusterID string       `json:"cluster_id"`
	Leader    string       `json:"leader"`
	Members   []MemberInfo `json:"members"`
}

// Find returns the member with id, if listed.
func (ms Membership) Find(id string) (MemberInfo, bool) {
	for _, m := range ms.Members {
		if m.ID == id {
			return m, true
		}
	}
	return MemberInfo{}, false
}

// Members lists the members with their catch-up state.
func (c *Client) Members(ctx context.Context) (Membership, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out Membership
	err := c.Do(ctx, "GET", "/v1/cluster/members", nil, &out)
	return out, err
}

// AddMember asks for member id at raft address addr to be added (it joins
// as a non-voter; the leader's policy promotes it).
func (c *Client) AddMember(ctx context.Context, id, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return c.Do(ctx, "POST", "/v1/cluster/members", map[string]string{"id": id, "address": addr}, nil)
}

// RemoveMember removes member id.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return c.Do(ctx, "DELETE", "/v1/cluster/members/"+id, nil, nil)
}

// StartSpare starts spare i with -join for the cluster clusterID (GET
// /v1/cluster/members gives it); it waits to be added.
func (c *Cluster) StartSpare(i int, clusterID string) error {
	m := c.Spares[i]
	m.join = clusterID
	return c.start(m)
}

// StopSpare SIGTERMs spare i and waits for a clean exit.
func (c *Cluster) StopSpare(i int, timeout time.Duration) error { return c.stop(c.Spares[i], timeout) }
