package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

// jobraftCluster: Controllers (three or five) in this process on loopback, every
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

// submit: one durable submit through the leader; id "" lets the
// controller assign one.
func (c *jobraftCluster) submit(ctx context.Context, ctl *jobraft.Controller, id string, payload []byte) error {
	_, err := ctl.Submit(ctx, jobraft.SubmitRequest{ID: id, Queue: "bench", Kind: "k", Payload: payload})
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

// handoff: submit a job into queue and wait until a worker finished it.
func (c *jobraftCluster) handoff(ctx context.Context, ctl *jobraft.Controller, queue string, payload []byte) error {
	s, err := ctl.Submit(ctx, jobraft.SubmitRequest{Queue: queue, Kind: "k", Payload: payload})
	if err != nil {
		return err
	}
	j, err := ctl.Wait(ctx, s.ID)
	if err != nil {
		return err
	}
	if j.State != jobraft.StateSucceeded {
		return fmt.Errorf("jobraft: job %s finished %v", j.ID, j.State)
	}
	return nil
}

// workers starts w workers on queue of ctl and returns once they are
// started; they work until ctx ends, then done is closed.
type workers func(ctx context.Context, ctl *jobraft.Controller, queue string, w int, done chan<- struct{})

// withWorkers runs measure with w workers of kind start working on
// queue, and stops them after it.
func (c *jobraftCluster) withWorkers(ctl *jobraft.Controller, queue string, w int, start workers, measure func(queue string) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start(ctx, ctl, queue, w, done)
	err := measure(queue)
	cancel()
	<-done
	return err
}

// runWorkers: one Controller.Run with w slots on queue, acking every job
// at once.
func runWorkers(ctx context.Context, ctl *jobraft.Controller, queue string, w int, done chan<- struct{}) {
	go func() {
		defer close(done)
		_ = ctl.Run(ctx, jobraft.WorkerConfig{Worker: "run", Queues: map[string]int{queue: w}, PollWait: 10 * time.Second,
			Default: func(context.Context, jobraft.Job) ([]byte, error) { return nil, nil }, OnError: func(jobraft.Job, error) {}})
	}()
}

// claimWorkers: w goroutines, each claiming one job of queue at a time
// (long-poll) and acking it.
func claimWorkers(ctx context.Context, ctl *jobraft.Controller, queue string, w int, done chan<- struct{}) {
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := jobraft.ClaimRequest{Queues: []string{queue}, Worker: fmt.Sprint("w", i), Max: 1, Wait: 10 * time.Second}
			for ctx.Err() == nil {
				ls, err := ctl.Claim(ctx, req)
				if err != nil && ctx.Err() == nil {
					select { // a leadership change under load: the submitters count it
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
				for _, l := range ls {
					_ = l.Ack(ctx, nil)
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
}
