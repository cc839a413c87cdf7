package backup

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// Restore seeds dataDir as a member of a NEW cluster from the backup file
// at path (jobraft.Restore has the procedure): members is the new
// cluster's configuration. The file is checked whole first (VerifyFile);
// a file that fails a check is refused with a *CorruptError and dataDir is
// left as it was, as is a data dir that already holds member state
// (raft.ErrSeedExisting).
func Restore(path, dataDir string, members []raft.Member) (*Manifest, error) {
	m, err := VerifyFile(path)
	if err != nil {
		return nil, err
	}
	ar, err := reopen(path, m)
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	if err := raft.Seed(dataDir, members, m.Index, ar); err != nil {
		return nil, fmt.Errorf("jobraft: restore: %w", err)
	}
	return m, nil
}

// VerifyFile checks the backup file at path whole and returns its
// manifest: header, manifest, artifact size and SHA-256 (Decode), and the
// state stream must pass fsm.VerifySnapshot (every check a restore makes,
// without building the state: memory does not grow with it) with the
// manifest's index, state digest and job count. Every problem found is
// listed in one *CorruptError. It writes nothing.
func VerifyFile(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, ar, err := Decode(f)
	if err != nil {
		return nil, err
	}
	info, err := fsm.VerifySnapshot(ar, m.Size, func() (io.ReadCloser, error) { return reopen(path, m) })
	if err != nil {
		if !errors.Is(err, fsm.ErrCorruptSnapshot) && !errors.Is(err, fsm.ErrSnapshotVersion) {
			return nil, err
		}
		// Report every problem: the artifact's own checks too.
		p := []string{"state stream: " + err.Error()}
		var ce *CorruptError
		if _, derr := io.Copy(io.Discard, ar); errors.As(derr, &ce) {
			p = append(p, ce.Problems...)
		}
		return nil, &CorruptError{Problems: p}
	}
	// The stream ended: the reader checks size, SHA-256, trailing bytes.
	if _, err := io.Copy(io.Discard, ar); err != nil {
		return nil, err
	}
	var p []string
	if info.Index != m.Index {
		p = append(p, fmt.Sprintf("state verified at index %d, manifest says %d", info.Index, m.Index))
	}
	if got := hex.EncodeToString(info.Digest[:]); got != m.StateDigest {
		p = append(p, fmt.Sprintf("state digest %s, manifest says %s", got, m.StateDigest))
	}
	if info.Jobs != m.Jobs {
		p = append(p, fmt.Sprintf("%d jobs verified, manifest says %d", info.Jobs, m.Jobs))
	}
	if len(p) > 0 {
		return nil, &CorruptError{Problems: p}
	}
	return m, nil
}

// reopen opens the backup at path again for a second read of its
// artifact; the file must still carry manifest m.
func reopen(path string, m *Manifest) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	m2, ar, err := Decode(f)
	if err == nil && m2.SHA256 != m.SHA256 {
		err = fmt.Errorf("%w: %s changed while it was read", ErrCorrupt, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{ar, f}, nil
}
