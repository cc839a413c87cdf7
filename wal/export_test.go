package wal

import "github.com/hashicorp/raft"

// Helpers of the crash tests for the external tests of this directory
// (faultfs_test.go, package wal_test, which imports wal/faultfs).

// CrashBatch returns the crash tests' entries [a, b], term 1+i/100.
func CrashBatch(a, b uint64) []*raft.Log {
	var out []*raft.Log
	for i := a; i <= b; i++ {
		out = append(out, crashEntry(i, 1+i/100))
	}
	return out
}

// CheckCrashBatches checks l holds exactly [1, last] as CrashBatch wrote it.
func CheckCrashBatches(l *Log, last uint64) error {
	m := newCrashModel()
	for i := uint64(1); i <= last; i++ {
		m.terms[i] = 1 + i/100
	}
	m.first, m.last = 1, last
	if last == 0 {
		m.first = 0
	}
	first, _ := l.FirstIndex()
	got, _ := l.LastIndex()
	return crashCheck(l, first, got, m)
}

// CrashEntry returns the crash tests' entry (index, term): a stamped
// command whose payload is a function of both.
func CrashEntry(index, term uint64) *raft.Log { return crashEntry(index, term) }
