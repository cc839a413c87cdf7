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
