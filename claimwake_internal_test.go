package jobraft

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// waitClaiming polls until n claims wait on c (a deadline, no sleep).
func waitClaiming(t *testing.T, c *Controller, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for c.rec.Claiming() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims waiting, want %d", c.rec.Claiming(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

type claimAnswer struct {
	who    int
	leases []*Lease
	err    error
}

// N claims waiting on one queue and one submit of one job: exactly one
// claim is woken and takes it, the others keep waiting (no claim proposed
// comes back empty), and each later job goes to one of them, until all
// have one. The poll interval is a minute: only the wake-ups can do it.
func TestSubmitOfOneJobWakesOneWaitingClaim(t *testing.T) {
	c := openSolo(t, func(cfg *Config) { cfg.ClaimPollInterval = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 8
	answers := make(chan claimAnswer, n)
	for i := range n {
		go func() {
			ls, err := c.Claim(ctx, ClaimRequest{Queues: []string{"q"}, Worker: fmt.Sprint("w", i), Wait: 50 * time.Second})
			answers <- claimAnswer{i, ls, err}
		}()
	}
	waitClaiming(t, c, n)
	taken := map[string]int{}
	for k := range n {
		j, err := c.Submit(ctx, SubmitRequest{Queue: "q", Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		a := <-answers
		if a.err != nil || len(a.leases) != 1 || a.leases[0].Job.ID != j.ID {
			t.Fatalf("job %d: claim %d answered %d leases, %v; want job %s", k, a.who, len(a.leases), a.err, j.ID)
		}
		taken[j.ID] = a.who
		waitClaiming(t, c, n-k-1)
		select {
		case b := <-answers:
			t.Fatalf("job %d woke a second claim: %d answered %d leases, %v", k, b.who, len(b.leases), b.err)
		default:
		}
	}
	if len(taken) != n {
		t.Fatalf("%d jobs taken, want %d", len(taken), n)
	}
	if e := c.emptyClaims.Load(); e != 0 {
		t.Fatalf("%d claims came back empty, want 0", e)
	}
}

// A claim woken for a job and canceled before it proposed does not strand
// the job: its turn passes to the next claim in line, which takes it at
// once (the poll interval, a minute, never comes into it).
func TestWokenClaimCanceledPassesItsTurn(t *testing.T) {
	c := openSolo(t, func(cfg *Config) { cfg.ClaimPollInterval = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	firstCtx, cancelFirst := context.WithCancel(ctx)
	woken := make(chan struct{})
	release := make(chan struct{})
	c.claimWoken = func() { // only the first claim is woken by the job
		close(woken)
		<-release
	}
	answers := make(chan claimAnswer, 2)
	go func() {
		ls, err := c.Claim(firstCtx, ClaimRequest{Queues: []string{"q"}, Worker: "first", Wait: 50 * time.Second})
		answers <- claimAnswer{0, ls, err}
	}()
	waitClaiming(t, c, 1)
	go func() {
		ls, err := c.Claim(ctx, ClaimRequest{Queues: []string{"q"}, Worker: "second", Wait: 20 * time.Second})
		answers <- claimAnswer{1, ls, err}
	}()
	waitClaiming(t, c, 2)
	j, err := c.Submit(ctx, SubmitRequest{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	<-woken
	cancelFirst()
	c.claimWoken = nil // read only by the first claim, which waits for release
	close(release)
	first := <-answers
	if first.who != 0 || !errors.Is(first.err, ErrNotApplied) || len(first.leases) != 0 {
		t.Fatalf("claim %d answered %d leases, %v; want the canceled first claim, not applied", first.who, len(first.leases), first.err)
	}
	second := <-answers
	if second.err != nil || len(second.leases) != 1 || second.leases[0].Job.ID != j.ID {
		t.Fatalf("the second claim answered %d leases, %v; want job %s", len(second.leases), second.err, j.ID)
	}
	if e := c.emptyClaims.Load(); e != 0 {
		t.Fatalf("%d claims came back empty, want 0", e)
	}
}
