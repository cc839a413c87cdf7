package client

import (
	"context"
	"net/url"
)

// MemberInfo is one member in GET /v1/cluster/members: its suffrage, role
// and catch-up state as the leader's catch-up policy sees it.
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

// Membership lists the members with their catch-up state.
func (c *Client) Membership(ctx context.Context) (Membership, error) {
	var out Membership
	err := c.do(ctx, &call{method: "GET", path: "/v1/cluster/members", out: &out})
	return out, err
}

// AddMember asks for member id at raft address addr to be added: it joins
// as a non-voter and the leader's catch-up policy promotes it (start it
// first with jobd -join). It is not resent after an unknown outcome; ask
// Membership, then add again (adding a listed member changes nothing).
func (c *Client) AddMember(ctx context.Context, id, addr string) error {
	return c.do(ctx, &call{method: "POST", path: "/v1/cluster/members",
		in: map[string]string{"id": id, "address": addr}, mutates: true})
}

// RemoveMember removes member id (the leader included). It is not resent
// after an unknown outcome.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	return c.do(ctx, &call{method: "DELETE", path: "/v1/cluster/members/" + url.PathEscape(id), mutates: true})
}
