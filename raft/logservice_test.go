package raft_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
)

// A member serves the log services its Config names on its RPC channel,
// over its own log; a service cannot take a method of the member's own, and
// a nil one is refused, before anything is opened.
func TestLogServicesServedOverTheMembersLog(t *testing.T) {
	cfg := clustertest.FastConfig(t, "solo", t.TempDir(), clustertest.FreeAddr(t))
	cfg.Bootstrap = true
	cfg.LogServices = map[string]raft.LogService{"test.last": func(_ context.Context, log hraft.LogStore, floor func() uint64, _ []byte) ([]byte, error) {
		last, err := log.LastIndex()
		return []byte(strconv.FormatUint(last, 10) + "/" + strconv.FormatUint(floor(), 10)), err
	}}
	n := clustertest.OpenNew(t, cfg, clustertest.NewKV())
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := n.Propose(ctx, []byte("k=v"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := transport.NewClient(transport.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Call(ctx, n.Addr(), "test.last", nil)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := n.Log().LastIndex()
	if want := strconv.FormatUint(last, 10) + "/" + strconv.FormatUint(n.Log().PersistedFloor(), 10); string(out) != want || last < res.Index {
		t.Fatalf("log service answered %q, want %q (proposal at %d)", out, want, res.Index)
	}

	for name, svcs := range map[string]map[string]raft.LogService{
		"own method": {"jr.propose": func(context.Context, hraft.LogStore, func() uint64, []byte) ([]byte, error) { return nil, nil }},
		"nil":        {"test.nil": nil},
	} {
		bad := clustertest.FastConfig(t, "bad", t.TempDir(), clustertest.FreeAddr(t))
		bad.LogServices = svcs
		if n, err := raft.Open(bad, clustertest.NewKV()); !errors.Is(err, raft.ErrInvalidConfig) {
			if n != nil {
				n.Close()
			}
			t.Fatalf("%s: Open answered %v, want ErrInvalidConfig", name, err)
		}
	}
}
