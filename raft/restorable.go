package raft

import (
	hraft "github.com/hashicorp/raft"

	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/wal"
)

// restorable is what a member's start-up knows of the snapshot
// hashicorp/raft will restore: the newest listed snapshot whose artifact
// verifies, read whole (snapshot.Store.Verify; raft restores the newest
// whose restore succeeds, and a restore through the store's reader fails on
// an artifact that differs from its manifest), and the snapshots refused
// before it, newest first. It is found once per start: each verification
// reads a whole artifact.
type restorable struct {
	newest  *hraft.SnapshotMeta // nil: no snapshot verifies
	refused []RefusedSnapshot
}

// findRestorable verifies the listed snapshots, newest first, up to the
// first that verifies.
func findRestorable(snaps *snapshot.Store) (restorable, error) {
	var r restorable
	metas, err := snaps.List()
	if err != nil {
		return r, err
	}
	for _, m := range metas {
		if _, err := snaps.Verify(m.ID); err != nil {
			r.refused = append(r.refused, RefusedSnapshot{ID: m.ID, Index: m.Index, Err: err})
			continue
		}
		r.newest = m
		break
	}
	return r, nil
}

// checkRestorable refuses to start a member whose state could not be
// rebuilt: hashicorp/raft restores the newest snapshot that verifies (r)
// and then reads the log from that snapshot's index + 1. When the newest
// snapshot fails verification and the log was compacted past the older
// one, that entry is gone and NewRaft panics ("log not found"); this check
// turns the panic into a typed refusal (ErrUnrestorable, diagnosed by
// *UnrestorableError) naming what is missing.
func checkRestorable(log *wal.Log, r restorable) error {
	first, err := log.FirstIndex()
	if err != nil {
		return err
	}
	if first <= 1 {
		return nil // the log starts at the beginning (or is empty)
	}
	if r.newest != nil && r.newest.Index+1 >= first {
		return nil
	}
	ue := &UnrestorableError{FirstIndex: first, Refused: r.refused}
	if r.newest != nil {
		ue.Verified, ue.VerifiedIndex = r.newest.ID, r.newest.Index
	}
	return ue
}

// resetLogBelowSnapshot resets a log that ends below the snapshot raft will
// restore (r, the newest that verifies). Raft then continues from the
// snapshot's index + 1, which such a log cannot take: every append would
// leave a gap and be refused (G2), and the member would never converge. Two
// things leave a log there (raft's own logs otherwise reach every snapshot
// they took or installed: a snapshot covers only applied entries, and an
// install resets the log): a power loss during an install, after its
// snapshot was sealed and before the log's reset was durable
// (TestPowerLossDuringInstall), and writes the disk acknowledged and then
// lost. Either way the snapshot covers every entry the log still holds, so
// they are dropped. It returns the snapshot index the log was reset for (0:
// nothing done) and the log's last index before.
func resetLogBelowSnapshot(log *wal.Log, r restorable) (uint64, uint64, error) {
	last, err := log.LastIndex()
	if err != nil || last == 0 || r.newest == nil || r.newest.Index <= last {
		return 0, 0, err
	}
	first, err := log.FirstIndex()
	if err != nil {
		return 0, 0, err
	}
	return r.newest.Index, last, log.DeleteRange(first, last)
}
