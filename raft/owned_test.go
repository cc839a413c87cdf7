package raft_test

import (
	"context"
	"errors"
	"testing"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// ProposeOwned commits the command behind the room, on the leader and
// forwarded from a follower; on the leader the entry is the caller's
// buffer, sealed in place (the command is not copied); a buffer without
// room for the envelope is refused and proposes nothing.
func TestProposeOwned(t *testing.T) {
	c := clustertest.StartNodes(t, 3, nil, nil)
	l := c.WaitLeader(wait)
	f := (l + 1) % 3
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	owned := func(cmd string) []byte { return append(make([]byte, raft.Headroom), cmd...) }

	buf := owned("a=1")
	res, err := c.Nodes[l].ProposeOwned(ctx, buf)
	if err != nil {
		t.Fatalf("on the leader: %v", err)
	}
	var e hraft.Log
	if err := c.Nodes[l].Log().GetLog(res.Index, &e); err != nil {
		t.Fatal(err)
	}
	if string(e.Data[raft.Headroom:]) != "a=1" || e.Data[0] != 1 {
		t.Fatalf("entry %d holds %d bytes, command equal %v, envelope version %d", res.Index, len(e.Data), string(e.Data[raft.Headroom:]) == "a=1", e.Data[0])
	}
	if &e.Data[0] != &buf[0] {
		t.Fatal("the entry is a copy of the buffer, not the buffer sealed in place")
	}
	if _, err := c.Nodes[f].ProposeOwned(ctx, owned("b=2")); err != nil {
		t.Fatalf("forwarded from a follower: %v", err)
	}
	for _, short := range [][]byte{nil, make([]byte, raft.Headroom-1)} {
		if _, err := c.Nodes[l].ProposeOwned(ctx, short); !errors.Is(err, raft.ErrRejected) {
			t.Fatalf("%d bytes: %v, want ErrRejected", len(short), err)
		}
	}
	if _, err := c.Nodes[l].ProposeOwned(ctx, owned("c=3")); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(wait)
	for i, kv := range c.KVs {
		if a, _ := kv.Get("a"); a != "1" {
			t.Fatalf("m%d: a=%q", i, a)
		}
		if b, _ := kv.Get("b"); b != "2" {
			t.Fatalf("m%d: b=%q", i, b)
		}
		if kv.Len() != 3 {
			t.Fatalf("m%d holds %d keys, want 3 (the refused buffers proposed nothing)", i, kv.Len())
		}
	}
}
