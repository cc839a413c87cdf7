package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/catchup"
	"github.com/jobraft/jobraft/raft"
)

// cluster is three Controllers (or -members of them) in this process on loopback, real files
// with fsync, every setting at its default but the catch-up stream, which
// is unthrottled so that a new member's snapshot install runs at what the
// disk and the member take (the install rate is measured against the
// disk's).
type cluster struct {
	dir        string
	noProgress int // the catch-up policy's NoProgressRounds (0: default)
	members    []raft.Member
	ctls       []*jobraft.Controller // nil while a member is closed
	// closedAt is the applied index of the member closed last (a
	// restart waits for it when no other member is open to say more).
	closedAt uint64
}

// memberConfig is member m's Config (its data dir in c.dir).
func (c *cluster) memberConfig(m raft.Member, bootstrap bool, members []raft.Member) jobraft.Config {
	return jobraft.Config{Config: raft.Config{
		ID: m.ID, DataDir: filepath.Join(c.dir, m.ID), BindAddr: m.Address,
		Bootstrap: bootstrap, InitialMembers: members, Logger: hclog.NewNullLogger(),
		CatchUp: catchup.Policy{MaxStreamBytesPerSecond: -1, NoProgressRounds: c.noProgress},
	}}
}

// freeAddrs returns n loopback addresses whose ports were free a moment
// ago (a race with another process is retried by the caller).
func freeAddrs(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// startCluster opens n members (3, or 1: -members) in dir and waits for
// a leader whose first barrier committed.
func startCluster(dir string, noProgress, n int) (*cluster, error) {
	var last error
	for range 5 { // a port taken between freeAddrs and Open: other ports
		addrs, err := freeAddrs(n)
		if err != nil {
			return nil, err
		}
		c := &cluster{dir: filepath.Join(dir, fmt.Sprint("c-", addrs[0][len("127.0.0.1:"):])), noProgress: noProgress}
		for i, a := range addrs {
			c.members = append(c.members, raft.Member{ID: fmt.Sprint("m", i), Address: a, Voter: true})
		}
		c.ctls = make([]*jobraft.Controller, n)
		if last = c.openAll(); last == nil {
			return c, nil
		}
		c.close()
	}
	return nil, last
}

func (c *cluster) openAll() error {
	for i := range c.members {
		if err := c.open(i); err != nil {
			return err
		}
	}
	l, err := c.waitLeader(60 * time.Second)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = l.Node().LinearizableRead(ctx)
	return err
}

// open opens member i (again, after close) from its data dir.
func (c *cluster) open(i int) error {
	ctl, err := jobraft.Open(context.Background(), c.memberConfig(c.members[i], true, c.members))
	if err != nil {
		return err
	}
	c.ctls[i] = ctl
	return nil
}

// leader is the member leading now, or nil.
func (c *cluster) leader() *jobraft.Controller {
	for _, ctl := range c.ctls {
		if ctl != nil && ctl.Node().Status().Role == "Leader" {
			return ctl
		}
	}
	return nil
}

func (c *cluster) waitLeader(d time.Duration) (*jobraft.Controller, error) {
	var l *jobraft.Controller
	err := waitUntil(d, func() bool { l = c.leader(); return l != nil })
	if err != nil {
		return nil, fmt.Errorf("no leader: %w", err)
	}
	return l, nil
}

// follower is the index of a member that is open and not leading.
func (c *cluster) follower() int {
	for i, ctl := range c.ctls {
		if ctl != nil && ctl.Node().Status().Role != "Leader" {
			return i
		}
	}
	return -1
}

// closeMember closes member i (its memory becomes garbage).
func (c *cluster) closeMember(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.closedAt = c.ctls[i].Node().AppliedIndex()
	err := c.ctls[i].Close(ctx)
	c.ctls[i] = nil
	return err
}

func (c *cluster) close() {
	for i, ctl := range c.ctls {
		if ctl != nil {
			_ = c.closeMember(i)
		}
	}
}

// waitApplied waits until every open member holds want jobs.
func (c *cluster) waitJobs(want int, d time.Duration) error {
	return waitUntil(d, func() bool {
		for _, ctl := range c.ctls {
			if ctl != nil && ctl.LocalStats().Jobs != want {
				return false
			}
		}
		return true
	})
}

// settle takes a snapshot on every open member (retried while one the
// cadence started runs) before the rates are measured. A backlog that grew
// over a day was snapshotted along the way; a preloaded one is in the log,
// in a few thousand large entries: below the cadence's entry floor
// (raft.Config.SnapshotThreshold) until the rates' small entries pass it,
// when the persist of the whole state (tens of seconds at 10M) falls into
// a 5 s window and measures the persist, not the rates.
func (c *cluster) settle(d time.Duration) error {
	for _, ctl := range c.ctls {
		if ctl == nil {
			continue
		}
		if err := waitUntil(d, func() bool {
			err := ctl.Node().Raft().Snapshot().Error()
			return err == nil || errors.Is(err, hraft.ErrNothingNewToSnapshot)
		}); err != nil {
			return fmt.Errorf("the preload's snapshot on %s: %w", ctl.Node().Status().ID, err)
		}
	}
	return nil
}

var errTimeout = errors.New("timed out")

// waitUntil polls cond every 20 ms for at most d.
func waitUntil(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v", errTimeout, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
