package jobraft

import (
	"context"
	"fmt"
	"io"

	"github.com/jobraft/jobraft/backup"
	"github.com/jobraft/jobraft/raft"
)

// BackupOptions configures Controller.Backup: the cluster ID recorded in
// the manifest (a cluster restored from the backup must use another) and
// the directory that holds the spooled state while it is written (default
// os.TempDir(); it needs room for one copy of the state).
type BackupOptions = backup.Options

// Backup writes a consistent backup of the whole job state to w (the
// backup package's format) and returns its manifest.
//
// The state is taken at a linearizable point: after a read barrier (the
// leader confirms its leadership with a quorum and this member applies up
// to the leader's commit index), so every operation acknowledged anywhere
// before Backup was called is in it. Backup may run on any member; it never
// stops the cluster (the state is a copy-on-write snapshot of the state
// machine).
//
// The backup is verified before a byte reaches w, in memory that does not
// grow with the state: the state stream is spooled once, hashed and
// checked by fsm.VerifySnapshot as it passes (the verdict a restore would
// reach, the state digest recomputed), then copied to w with its SHA-256
// checked again (backup.Write). An error before
// anything was written to w means nothing was; an error after means w
// holds a partial backup, which Decode refuses (discard it).
func (c *Controller) Backup(ctx context.Context, w io.Writer, o BackupOptions) (*backup.Manifest, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	if _, err := c.node.LinearizableRead(ctx); err != nil {
		return nil, fmt.Errorf("jobraft: backup: read barrier: %w", err)
	}
	snap, err := c.jobs.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	defer snap.Release()
	return backup.Write(w, snap, c.node.Status(), o)
}

// Restore seeds dataDir as a member of a NEW cluster from the backup file
// at path: members is the new cluster's configuration (the same on every
// member). Seed each member's (empty) data dir from the same file, then
// Open each with its Config as usual: the members start with the backup's
// state at its index and elect a leader among themselves; every member's
// state digest at that index equals the manifest's StateDigest.
//
// The file is checked whole before anything is written: header, manifest,
// artifact size and SHA-256, and the state stream verified (fsm.VerifySnapshot) must
// have the manifest's index and state digest. A file that fails any check
// is refused with a *backup.CorruptError (errors.Is backup.ErrCorrupt)
// listing what differs, and dataDir is left as it was. A data dir that
// already holds member state is refused (raft.ErrSeedExisting).
//
// The host gives the new cluster a new identity (jobd: a new -cluster-id,
// and new member certificates), so that the restored cluster and the old
// one can never be mistaken for each other.
func Restore(path, dataDir string, members []raft.Member) (*backup.Manifest, error) {
	return backup.Restore(path, dataDir, members)
}

// VerifyBackup checks the backup file at path whole, the state digest
// included (fsm.VerifySnapshot: no state is built), and returns its
// manifest. It writes nothing.
func VerifyBackup(path string) (*backup.Manifest, error) { return backup.VerifyFile(path) }
