package jobraft

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/backup"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/snapshot"
)

// BackupOptions configures Controller.Backup.
type BackupOptions struct {
	// ClusterID is recorded in the manifest (the host's name for the
	// cluster; jobd's is in its data dir). A cluster restored from the
	// backup must use another.
	ClusterID string
	// TempDir holds the sealed copy while it is written (default
	// os.TempDir()); it needs room for one copy of the state.
	TempDir string
}

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
// The backup is verified before a byte reaches w: the artifact is sealed
// with the snapshot package (fsynced, re-read from disk and checked against
// its manifest), and the state machine is rebuilt from it to confirm it
// restores to the manifest's state digest. An error before anything was
// written to w means nothing was; an error after means w holds a partial
// backup, which Decode refuses (discard it).
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
	st := c.node.Status()

	tmp, err := os.MkdirTemp(o.TempDir, "jobraft-backup-")
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	// 1. The state stream, to a spool file.
	spool := filepath.Join(tmp, "state")
	if err := persistTo(spool, snap); err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	// 2. Rebuilt: its index, digest and job count, and proof it restores.
	index, digest, jobs, err := rebuildFile(spool)
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: the state written does not restore: %w", err)
	}
	// 3. Sealed by the snapshot store: fsynced, re-read, checked.
	store, err := snapshot.Open(filepath.Join(tmp, "sealed"), snapshot.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	var conf hraft.Configuration
	for _, m := range st.Members {
		s := hraft.Voter
		if !m.Voter {
			s = hraft.Nonvoter
		}
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: s, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address)})
	}
	term := max(st.Term, 1)
	sm, err := seal(store, spool, index, term, conf)
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	smBytes, err := sm.Encode()
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	m := &backup.Manifest{
		ClusterID: o.ClusterID, Member: c.node.ID(), Index: index, Term: term, Jobs: jobs,
		StateDigest: hex.EncodeToString(digest[:]), Size: sm.Size, SHA256: hex.EncodeToString(sm.Digest[:]),
		Snapshot: smBytes, Created: time.Now().UTC(),
	}
	// 4. Out, from the sealed copy (Open verifies it once more).
	_, rc, err := store.Open(sm.ID)
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	defer rc.Close()
	if err := backup.Encode(w, m, rc); err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	return m, nil
}

func persistTo(path string, snap fsm.Snapshot) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = snap.Persist(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rebuildFile restores a scratch state machine from a state stream file.
func rebuildFile(path string) (uint64, [32]byte, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, [32]byte{}, 0, err
	}
	defer f.Close()
	return rebuild(f)
}

// rebuild restores a scratch state machine from r (which must end where
// the stream ends) and returns its applied index, digest and job count.
func rebuild(r io.Reader) (uint64, [32]byte, int, error) {
	scratch := fsm.New()
	if err := scratch.Restore(r); err != nil {
		return 0, [32]byte{}, 0, err
	}
	d := scratch.Digest()
	return d.Index, d.Sum, scratch.Len(), nil
}

// seal publishes the spool file in store and returns its manifest.
func seal(store *snapshot.Store, spool string, index, term uint64, conf hraft.Configuration) (*snapshot.Manifest, error) {
	sink, err := store.Create(1, index, term, conf, 0, nil)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(spool)
	if err != nil {
		_ = sink.Cancel()
		return nil, err
	}
	defer f.Close()
	if _, err := io.Copy(sink, f); err != nil {
		_ = sink.Cancel()
		return nil, err
	}
	if err := sink.Close(); err != nil {
		return nil, err
	}
	id := sink.ID()
	m, err := store.Manifest(id)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Restore seeds dataDir as a member of a NEW cluster from the backup file
// at path: members is the new cluster's configuration (the same on every
// member). Seed each member's (empty) data dir from the same file, then
// Open each with its Config as usual: the members start with the backup's
// state at its index and elect a leader among themselves; every member's
// state digest at that index equals the manifest's StateDigest.
//
// The file is checked whole before anything is written: header, manifest,
// artifact size and SHA-256, and the state machine rebuilt from it must
// have the manifest's index and state digest. A file that fails any check
// is refused with a *backup.CorruptError (errors.Is backup.ErrCorrupt)
// listing what differs, and dataDir is left as it was. A data dir that
// already holds member state is refused (raft.ErrSeedExisting).
//
// The host gives the new cluster a new identity (jobd: a new -cluster-id,
// and new member certificates), so that the restored cluster and the old
// one can never be mistaken for each other.
func Restore(path, dataDir string, members []raft.Member) (*backup.Manifest, error) {
	m, err := verifyBackup(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m2, ar, err := backup.Decode(f)
	if err != nil {
		return nil, err
	}
	if m2.SHA256 != m.SHA256 {
		return nil, fmt.Errorf("%w: %s changed while it was restored", backup.ErrCorrupt, path)
	}
	if err := raft.Seed(dataDir, members, m.Index, ar); err != nil {
		return nil, fmt.Errorf("jobraft: restore: %w", err)
	}
	return m, nil
}

// VerifyBackup checks the backup file at path whole, the state digest
// included (the state machine is rebuilt from it), and returns its
// manifest. It writes nothing.
func VerifyBackup(path string) (*backup.Manifest, error) { return verifyBackup(path) }

func verifyBackup(path string) (*backup.Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, ar, err := backup.Decode(f)
	if err != nil {
		return nil, err
	}
	index, digest, jobs, err := rebuild(ar)
	if err != nil {
		if !errors.Is(err, fsm.ErrCorruptSnapshot) {
			return nil, err
		}
		// Report every problem: the artifact's own checks too.
		p := []string{"state stream: " + err.Error()}
		var ce *backup.CorruptError
		if _, derr := io.Copy(io.Discard, ar); errors.As(derr, &ce) {
			p = append(p, ce.Problems...)
		}
		return nil, &backup.CorruptError{Problems: p}
	}
	// The stream ended: the reader checks size, SHA-256, trailing bytes.
	if _, err := io.Copy(io.Discard, ar); err != nil {
		return nil, err
	}
	var p []string
	if index != m.Index {
		p = append(p, fmt.Sprintf("state rebuilt at index %d, manifest says %d", index, m.Index))
	}
	if got := hex.EncodeToString(digest[:]); got != m.StateDigest {
		p = append(p, fmt.Sprintf("state digest %s, manifest says %s", got, m.StateDigest))
	}
	if jobs != m.Jobs {
		p = append(p, fmt.Sprintf("%d jobs rebuilt, manifest says %d", jobs, m.Jobs))
	}
	if len(p) > 0 {
		return nil, &backup.CorruptError{Problems: p}
	}
	return m, nil
}
