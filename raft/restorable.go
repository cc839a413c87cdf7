package raft

import (
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/wal"
)

// checkRestorable refuses to start a member whose state could not be
// rebuilt: hashicorp/raft restores the newest snapshot that opens (the
// sealed store verifies each before handing it out) and then reads the log
// from that snapshot's index + 1. When the newest snapshot fails
// verification and the log was compacted past the older one, that entry is
// gone and NewRaft panics ("log not found"); this check turns the panic into
// a typed refusal (ErrUnrestorable, diagnosed by *UnrestorableError)
// naming what is missing.
func checkRestorable(log *wal.Log, snaps *snapshot.Store) error {
	first, err := log.FirstIndex()
	if err != nil {
		return err
	}
	if first <= 1 {
		return nil // the log starts at the beginning (or is empty)
	}
	metas, err := snaps.List()
	if err != nil {
		return err
	}
	ue := &UnrestorableError{FirstIndex: first}
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			ue.Refused = append(ue.Refused, RefusedSnapshot{ID: m.ID, Index: m.Index, Err: err})
			continue
		}
		rc.Close()
		if m.Index+1 >= first {
			return nil
		}
		ue.Verified, ue.VerifiedIndex = m.ID, m.Index
		return ue
	}
	return ue
}

// resetLogBelowSnapshot resets a log that ends below the snapshot raft will
// restore (the newest that opens). Raft then continues from the snapshot's
// index + 1, which such a log cannot take: every append would leave a gap
// and be refused (G2), and the member would never converge. Two things leave
// a log there (raft's own logs otherwise reach every snapshot they took or
// installed: a snapshot covers only applied entries, and an install resets
// the log): a power loss during an install, after its snapshot was sealed
// and before the log's reset was durable (TestPowerLossDuringInstall), and
// writes the disk acknowledged and then lost. Either way the snapshot
// covers every entry the log still holds, so they are dropped. It returns the snapshot index
// the log was reset for (0: nothing done).
func resetLogBelowSnapshot(log *wal.Log, snaps *snapshot.Store) (uint64, uint64, error) {
	last, err := log.LastIndex()
	if err != nil || last == 0 {
		return 0, 0, err
	}
	metas, err := snaps.List()
	if err != nil {
		return 0, 0, err
	}
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			continue
		}
		rc.Close()
		if m.Index <= last {
			return 0, 0, nil
		}
		first, err := log.FirstIndex()
		if err != nil {
			return 0, 0, err
		}
		return m.Index, last, log.DeleteRange(first, last)
	}
	return 0, 0, nil
}
