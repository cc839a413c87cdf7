package jobraft

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/raft"
)

func openSolo(t *testing.T) *Controller {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := Open(context.Background(), Config{Config: raft.Config{
		ID: "solo", DataDir: t.TempDir(), BindAddr: addr, Bootstrap: true,
		HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond,
		Logger:             hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// A watch that falls behind (its events compacted away) while the job
// finishes does not lose the outcome: Wait reads the job again and
// returns it. The first watch here yields only the compaction, after the
// job has been acked, so the ack's event is in no watch Wait holds.
func TestWaitSurvivesCompactedWatch(t *testing.T) {
	c := openSolo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := c.Submit(ctx, SubmitRequest{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	finish := make(chan struct{})
	behind := func(wctx context.Context, from uint64, f WatchFilter) (<-chan Event, error) {
		if calls.Add(1) > 1 {
			return c.Watch(wctx, from, f)
		}
		out := make(chan Event)
		go func() {
			defer close(out)
			<-finish // the job finishes unseen
			select {
			case out <- Event{Kind: EventError, Err: &CompactedError{From: from, Oldest: from + 10}}:
			case <-wctx.Done():
			}
		}()
		return out, nil
	}
	done := make(chan error, 1)
	var got Job
	go func() {
		var err error
		got, err = c.wait(ctx, job.ID, behind)
		done <- err
	}()
	leases, err := c.Claim(ctx, ClaimRequest{Queues: []string{"q"}, Worker: "w", Wait: 5 * time.Second})
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v, %d leases", err, len(leases))
	}
	if err := leases[0].Ack(ctx, []byte("r")); err != nil {
		t.Fatal(err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.State != StateSucceeded || string(got.Result) != "r" || calls.Load() != 2 {
		t.Fatalf("wait returned %+v after %d watches, want the acked job after 2", got, calls.Load())
	}
}
