package client

import (
	"context"
	"net/url"
)

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
		in: MemberRequest{ID: id, Address: addr}, mutates: true})
}

// RemoveMember removes member id (the leader included). It is not resent
// after an unknown outcome.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	return c.do(ctx, &call{method: "DELETE", path: "/v1/cluster/members/" + url.PathEscape(id), mutates: true})
}
