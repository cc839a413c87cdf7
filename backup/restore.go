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
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m2, ar, err := Decode(f)
	if err != nil {
		return nil, err
	}
	if m2.SHA256 != m.SHA256 {
		return nil, fmt.Errorf("%w: %s changed while it was restored", ErrCorrupt, path)
	}
	if err := raft.Seed(dataDir, members, m.Index, ar); err != nil {
		return nil, fmt.Errorf("jobraft: restore: %w", err)
	}
	return m, nil
}

// VerifyFile checks the backup file at path whole and returns its
// manifest: header, manifest, artifact size and SHA-256 (Decode), and the
// state machine rebuilt from the artifact must have the manifest's index,
// state digest and job count. Every problem found is listed in one
// *CorruptError. It writes nothing.
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
	index, digest, jobs, err := rebuild(ar)
	if err != nil {
		if !errors.Is(err, fsm.ErrCorruptSnapshot) {
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
		return nil, &CorruptError{Problems: p}
	}
	return m, nil
}
