package raft_test

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/jobraft/jobraft/internal/test/clustertest"
	"github.com/jobraft/jobraft/raft"
)

// ledger records the outcome of every proposal of a unique key, and checks
// the outcomes against what every member applied afterwards:
//   - nil: applied exactly once on every member;
//   - ErrRejected: applied on no member;
//   - ErrIndeterminate: applied at most once, and the same on every member;
//   - any other error: a contract violation.
//
// Nothing may be applied that was never proposed, nor any key twice.
type ledger struct {
	mu  sync.Mutex
	out map[string]error
	ok  int
}

func newLedger() *ledger { return &ledger{out: map[string]error{}} }

func (l *ledger) record(key string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.out[key]; dup {
		panic("ledger: key proposed twice: " + key)
	}
	l.out[key] = err
	if err == nil {
		l.ok++
	}
}

// successes returns the number of nil outcomes so far.
func (l *ledger) successes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok
}

type outcomeCounts struct{ OK, Rejected, Indeterminate, IndeterminateApplied int }

func (c outcomeCounts) String() string {
	return fmt.Sprintf("ok %d, rejected %d, indeterminate %d (%d of them applied)", c.OK, c.Rejected, c.Indeterminate, c.IndeterminateApplied)
}

// check compares the ledger with each member's dump (member name → KV).
func (l *ledger) check(t testing.TB, dumps map[string]map[string]clustertest.Entry) outcomeCounts {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var c outcomeCounts
	names := make([]string, 0, len(dumps))
	for name := range dumps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for k, e := range dumps[name] {
			if _, ok := l.out[k]; !ok {
				t.Errorf("%s applied %q, which was never proposed", name, k)
			}
			if e.Writes != 1 {
				t.Errorf("%s applied %q %d times", name, k, e.Writes)
			}
		}
	}
	for k, err := range l.out {
		applied := 0
		for _, name := range names {
			if _, ok := dumps[name][k]; ok {
				applied++
			}
		}
		switch {
		case err == nil:
			c.OK++
			if applied != len(names) {
				t.Errorf("acknowledged %q applied on %d of %d members", k, applied, len(names))
			}
		case errors.Is(err, raft.ErrRejected) && errors.Is(err, raft.ErrIndeterminate):
			t.Errorf("%q: error of both classes: %v", k, err)
		case errors.Is(err, raft.ErrRejected):
			c.Rejected++
			if applied != 0 {
				t.Errorf("rejected %q applied on %d members (error: %v)", k, applied, err)
			}
		case errors.Is(err, raft.ErrIndeterminate):
			c.Indeterminate++
			if applied != 0 {
				c.IndeterminateApplied++
			}
			if applied != 0 && applied != len(names) {
				t.Errorf("indeterminate %q applied on %d of %d members", k, applied, len(names))
			}
		default:
			t.Errorf("%q: unclassified error %v", k, err)
		}
	}
	return c
}
