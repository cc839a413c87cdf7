package raft_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
)

// A follower whose log fsyncs fail (a real fault filesystem under its
// wal) fails closed and says so: Status.LogFailed names the class, one
// EventLogFailed wraps wal.ErrFailed. The other two keep committing.
// Restarted over a healthy disk it converges and the field is gone.
func TestLogFailedIsInStatusAndClearsOnRestart(t *testing.T) {
	var ffs [3]*faultfs.FS
	c := nodetest.StartWAL(t, 3, nil, nil, func(i int) []wal.Option {
		ffs[i] = faultfs.New(wal.OSFS{})
		return []wal.Option{wal.WithFS(ffs[i])}
	})
	leader := c.WaitLeader(wait)
	f := (leader + 1) % 3
	for i := 0; i < 5; i++ {
		if _, err := c.Propose(leader, fmt.Sprintf("set k%d v", i), wait); err != nil {
			t.Fatalf("propose before the fault: %v", err)
		}
	}
	c.WaitConverged(wait)
	if st := c.Nodes[f].Status(); st.LogFailed != "" {
		t.Fatalf("healthy member reports LogFailed %q", st.LogFailed)
	}
	events, cancel := c.Nodes[f].Events(64)
	defer cancel()

	ffs[f].FailSyncs(syscall.EIO)
	proposed := 5
	nodetest.WaitFor(t, wait, "the follower's log to fail closed", func() bool {
		l := c.Leader()
		if l < 0 {
			return false
		}
		if _, err := c.Propose(l, fmt.Sprintf("set k%d v", proposed), wait); err == nil {
			proposed++
		}
		return c.Nodes[f].Status().LogFailed != ""
	})
	if got := c.Nodes[f].Status().LogFailed; got != wal.FailSync {
		t.Fatalf("Status.LogFailed = %q, want %q", got, wal.FailSync)
	}
	var ev raft.Event
	nodetest.WaitFor(t, wait, "EventLogFailed", func() bool {
		for {
			select {
			case e := <-events:
				if e.Kind == raft.EventLogFailed {
					ev = e
					return true
				}
			default:
				return false
			}
		}
	})
	if !errors.Is(ev.Err, wal.ErrFailed) {
		t.Fatalf("EventLogFailed.Err = %v, want wal.ErrFailed", ev.Err)
	}
	// The healthy majority keeps committing.
	l := c.WaitLeader(wait)
	if _, err := c.Propose(l, "set after fault", wait); err != nil {
		t.Fatalf("propose on the healthy majority: %v", err)
	}

	// The disk is replaced: the same data dir, a healthy filesystem.
	c.StopMember(f)
	ffs[f].FailSyncs(nil)
	c.StartMember(f)
	c.WaitConverged(wait)
	if got := c.Nodes[f].Status().LogFailed; got != "" {
		t.Fatalf("after the restart Status.LogFailed = %q", got)
	}
}
