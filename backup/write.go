package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

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
	// TempDir holds the spooled state while the backup is written
	// (default os.TempDir()); it needs room for one copy of the state.
	TempDir string
}

// Write writes a backup of the state snap to w and returns its manifest;
// st is the status of the member that took snap (its ID, term and
// members are recorded). The caller takes snap at the point the backup
// stands for (jobraft.Controller.Backup: after a read barrier) and
// releases it after.
//
// The backup is verified before a byte reaches w, in memory that does not
// grow with the state: the state stream is written once to a spool file
// under o.TempDir, hashed (SHA-256) and checked by fsm.VerifySnapshot as
// it passes (every rule Restore checks, the state digest recomputed; a
// second read of the spool when the verifier needs one); then the header
// and manifest (index, job count, digest, size, SHA-256: known only now,
// and the format puts them first) and the spool, checked against the
// SHA-256 again as it is read back, go to w. An error before anything was
// written to w means nothing was; an error after means w holds a partial
// backup, which Decode refuses (discard it).
func Write(w io.Writer, snap fsm.Snapshot, st raft.Status, o Options) (*Manifest, error) {
	spool, err := os.CreateTemp(o.TempDir, "jobraft-backup-")
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	size, sum, info, err := spoolVerified(spool, snap)
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	term := max(st.Term, 1)
	m, err := manifestFor(o.ClusterID, st, term, info, size, sum)
	if err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	if err := Encode(w, m, spool); err != nil {
		return nil, fmt.Errorf("jobraft: backup: %w", err)
	}
	return m, nil
}

// spoolVerified writes snap's stream to spool, hashing it and checking it
// with fsm.VerifySnapshot as it passes, and returns its size, SHA-256 and
// what the verifier found. A stream the verifier refuses is an error
// (wrapping fsm.ErrCorruptSnapshot): it is never sent.
func spoolVerified(spool *os.File, snap fsm.Snapshot) (int64, [32]byte, fsm.SnapshotInfo, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := snap.Persist(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	h := &countingHash{h: sha256.New()}
	tee := io.TeeReader(pr, io.MultiWriter(spool, h))
	reread := func() (io.ReadCloser, error) {
		return os.Open(spool.Name())
	}
	var size int64 // the verifier's filter: 64 bytes a job, unknown: its largest
	if c, ok := snap.(interface{ Jobs() int }); ok {
		size = int64(c.Jobs()) * 64
	}
	info, verr := fsm.VerifySnapshot(tee, size, reread)
	pr.CloseWithError(io.ErrClosedPipe) // a refused stream stops the writer
	perr := <-done
	var sum [32]byte
	switch {
	case perr != nil && !errors.Is(perr, io.ErrClosedPipe):
		return 0, sum, info, perr
	case verr != nil:
		return 0, sum, info, fmt.Errorf("the state stream: %w", verr)
	}
	h.h.Sum(sum[:0])
	return h.n, sum, info, nil
}

// countingHash is a hash that counts what it was given.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// manifestFor is the manifest of an artifact of size bytes with SHA-256
// sum, verified as info, taken by the member of status st in term.
func manifestFor(clusterID string, st raft.Status, term uint64, info fsm.SnapshotInfo, size int64, sum [32]byte) (*Manifest, error) {
	var conf hraft.Configuration
	for _, m := range st.Members {
		s := hraft.Voter
		if !m.Voter {
			s = hraft.Nonvoter
		}
		conf.Servers = append(conf.Servers, hraft.Server{Suffrage: s, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Address)})
	}
	now := time.Now().UTC()
	sm := &snapshot.Manifest{FormatVersion: snapshot.FormatVersion, ID: fmt.Sprintf("%d-%d-%d", term, info.Index, now.UnixMilli()),
		SnapshotVersion: 1, Index: info.Index, Term: term, Configuration: conf, Size: size, Digest: sum, Created: now}
	smBytes, err := sm.Encode()
	if err != nil {
		return nil, err
	}
	return &Manifest{
		ClusterID: clusterID, Member: st.ID, Index: info.Index, Term: term, Jobs: info.Jobs,
		StateDigest: hex.EncodeToString(info.Digest[:]), Size: size, SHA256: hex.EncodeToString(sum[:]),
		Snapshot: smBytes, Created: now,
	}, nil
}
