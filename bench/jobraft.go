package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

// jobraftCluster: three Controllers in this process on loopback, every
// setting at its default (fsync on) but BatchHold when -hold sets it.
type jobraftCluster struct {
	ctls []*jobraft.Controller
}

func startJobraft(dir string, addrs []string, hold time.Duration) (*jobraftCluster, error) {
	var members []raft.Member
	for i, a := range addrs {
		members = append(members, raft.Member{ID: fmt.Sprint("j", i), Address: a, Voter: true})
	}
	c := &jobraftCluster{}
	for i, a := range addrs {
		ctl, err := jobraft.Open(context.Background(), jobraft.Config{Config: raft.Config{
			ID: members[i].ID, DataDir: filepath.Join(dir, members[i].ID), BindAddr: a,
			Bootstrap: true, InitialMembers: members, Logger: hclog.NewNullLogger(),
		}, BatchHold: hold})
		if err != nil {
			c.close()
			return nil, err
		}
		c.ctls = append(c.ctls, ctl)
	}
	if err := waitUntil(30*time.Second, func() bool { return c.leader() != nil }); err != nil {
		c.close()
		return nil, fmt.Errorf("jobraft: no leader: %w", err)
	}
	// The new leader's first barrier: until it commits, reads wait.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.leader().Node().LinearizableRead(ctx); err != nil {
		c.close()
		return nil, fmt.Errorf("jobraft: first read: %w", err)
	}
	return c, nil
}

func (c *jobraftCluster) leader() *jobraft.Controller {
	for _, ctl := range c.ctls {
		if ctl.Node().Status().Role == "Leader" {
			return ctl
		}
	}
	return nil
}

func (c *jobraftCluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ctl := range c.ctls {
		_ = ctl.Close(ctx)
	}
}

// submit: one durable submit through the leader.
func (c *jobraftCluster) submit(ctx context.Context, ctl *jobraft.Controller, payload []byte) error {
	_, err := ctl.Submit(ctx, jobraft.SubmitRequest{Queue: "bench", Kind: "k", Payload: payload})
	return err
}

// cycle: submit, claim one job of the shared queue, ack it.
func (c *jobraftCluster) cycle(ctx context.Context, ctl *jobraft.Controller, worker string, payload []byte) error {
	if _, err := ctl.Submit(ctx, jobraft.SubmitRequest{Queue: "cycle", Kind: "k", Payload: payload}); err != nil {
		return err
	}
	ls, err := ctl.Claim(ctx, jobraft.ClaimRequest{Queues: []string{"cycle"}, Worker: worker, Wait: 10 * time.Second})
	if err != nil {
		return err
	}
	if len(ls) != 1 {
		return errors.New("jobraft: claim returned no job")
	}
	return ls[0].Ack(ctx, nil)
}
