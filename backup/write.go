package backup

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/snapshot"
)

// Options configures Write (jobraft's BackupOptions).
type Options struct {
	// ClusterID is recorded in the manifest (the host's name for the
	// cluster; jobd's is in its data dir). A cluster restored from the
	// backup must use another.
	ClusterID string
	// TempDir holds the sealed copy while it is written (default
	// os.TempDir()); it needs room for one copy of the state.
	TempDir string
}

// Write writes a backup of the state snap to w and returns its manifest;
// st is the status of the member that took snap (its ID, term and
// members are recorded). The caller takes snap at the point the backup
// stands for (jobraft.Controller.Backup: after a read barrier) and
// releases it after.
//
// The backup is verified before a byte reaches w: the state is spooled to
// a file under o.TempDir, the state machine is rebuilt from it (its index,
// digest and job count go into the manifest), the artifact is sealed with
// the snapshot package (fsynced, re-read from disk and checked against its
// manifest) and streamed out from the sealed copy. An error before anything
// was written to w means nothing was; an error after means w holds a
// partial backup, which Decode refuses (discard it).
func Write(w io.Writer, snap fsm.Snapshot, st raft.Status, o Options) (*Manifest, error) {
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
	m := &Manifest{
		ClusterID: o.ClusterID, Member: st.ID, Index: index, Term: term, Jobs: jobs,
		StateDigest: hex.EncodeToString(digest[:]), Size: sm.Size, SHA256: hex.EncodeToString(sm.Digest[:]),
		Snapshot: smBytes, Created: time.Now().UTC(),
	}
	// 4. Out, from the sealed copy (Open verifies it once more).
	_, rc, err := store.Open(sm.ID)
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	defer rc.Close()
	if err := Encode(w, m, rc); err != nil {
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
