package snapshot

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
)

var _ raft.SnapshotSink = (*sink)(nil)

// sink is a candidate snapshot being written. raft writes to it from one
// goroutine; Close and Cancel are idempotent and may race with each other.
type sink struct {
	s   *Store
	m   *Manifest // Size and Digest are filled at Close
	dir string    // candidate dir, <id>.tmp

	mu     sync.Mutex
	f      File
	buf    *bufio.Writer
	h      hash.Hash
	n      int64
	werr   error // first write error; Close then fails
	done   bool
	result error // what the first Close or Cancel returned
}

func newSink(s *Store, m *Manifest, dir string) (*sink, error) {
	f, err := s.opts.fs.OpenFile(filepath.Join(dir, artifactName), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("snapshot: create artifact: %w", err)
	}
	k := &sink{s: s, m: m, dir: dir, f: f, h: sha256.New()}
	// The digest is taken of exactly the bytes handed to the file.
	k.buf = bufio.NewWriterSize(io.MultiWriter(f, k.h), 1<<20)
	return k, nil
}

// ID returns the snapshot's ID; valid for Store.Open once Close succeeded.
func (k *sink) ID() string { return k.m.ID }

// Write appends to the artifact.
func (k *sink) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return 0, ErrSinkClosed
	}
	if k.werr != nil {
		return 0, k.werr
	}
	n, err := k.buf.Write(p)
	k.n += int64(n)
	if err != nil {
		k.werr = fmt.Errorf("snapshot: write artifact %s: %w", k.m.ID, err)
		return n, k.werr
	}
	return n, nil
}

// Close seals the candidate and runs the consistency gate; only a candidate
// that passes is published. A rejection returns a *GateError.
func (k *sink) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return k.result
	}
	k.done = true
	k.result = k.seal()
	return k.result
}

// Cancel discards the candidate; nothing is published.
func (k *sink) Cancel() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return nil
	}
	k.done = true
	k.result = errors.New("snapshot: candidate was cancelled")
	_ = k.f.Close()
	if err := k.s.opts.fs.RemoveAll(k.dir); err != nil {
		return fmt.Errorf("snapshot: discard candidate %s: %w", k.dir, err)
	}
	return nil
}

// seal runs steps 1-5 of the gate (docs/snapshot.md).
func (k *sink) seal() error {
	s := k.s
	fail := func(err error) error {
		_ = k.f.Close()
		if rerr := s.opts.fs.RemoveAll(k.dir); rerr != nil {
			s.log.Error("failed to discard snapshot candidate", "path", k.dir, "error", rerr)
		}
		s.log.Error("snapshot candidate failed before the gate", "id", k.m.ID, "error", err)
		return err
	}
	if k.werr != nil {
		return fail(k.werr)
	}
	// 1. Artifact: flush, fsync, close.
	if err := k.buf.Flush(); err != nil {
		return fail(fmt.Errorf("snapshot: write artifact %s: %w", k.m.ID, err))
	}
	if s.opts.sync {
		if err := k.f.Sync(); err != nil {
			return fail(fmt.Errorf("snapshot: fsync artifact %s: %w", k.m.ID, err))
		}
	}
	if err := k.f.Close(); err != nil {
		return fail(fmt.Errorf("snapshot: close artifact %s: %w", k.m.ID, err))
	}
	// 2. Manifest: what was streamed, written and fsynced beside it.
	k.m.Size = k.n
	k.h.Sum(k.m.Digest[:0])
	enc, err := k.m.Encode()
	if err != nil {
		return fail(err)
	}
	manifestPath := filepath.Join(k.dir, manifestName)
	if err := writeFileSync(s.opts.fs, manifestPath, enc, s.opts.sync); err != nil {
		return fail(fmt.Errorf("snapshot: write manifest %s: %w", k.m.ID, err))
	}
	if err := s.syncDir(k.dir); err != nil {
		return fail(err)
	}
	// 3. Test seam.
	if s.opts.gateHook != nil {
		s.opts.gateHook(candidate{ID: k.m.ID, Dir: k.dir, Artifact: filepath.Join(k.dir, artifactName), Manifest: manifestPath})
	}
	// 4. The gate: re-read manifest and artifact from disk.
	if g := s.gate(k.m, k.dir); g != nil {
		return s.reject(k.m, k.dir, g)
	}
	// 5. Publish.
	return s.publish(k.m, k.dir)
}

// gate re-reads the candidate in dir and compares it with the sealed
// manifest m. It returns nil only if the manifest on disk is m and the
// artifact on disk has m's size and digest.
func (s *Store) gate(m *Manifest, dir string) *GateError {
	intact := false
	if b, err := readFile(s.opts.fs, filepath.Join(dir, manifestName)); err == nil {
		if onDisk, err := DecodeManifest(b); err == nil {
			intact = equalManifest(onDisk, m)
		}
	}
	size, digest, rerr := digestFile(s.opts.fs, filepath.Join(dir, artifactName))
	g := s.check(OpSeal, m, dir, size, digest, rerr)
	if g == nil && intact {
		return nil
	}
	if g == nil {
		g = s.check(OpSeal, m, dir, size, digest, errors.New("manifest on disk differs from the one sealed"))
	}
	g.ManifestIntact = intact
	return g
}

// publish renames the candidate into place, fsyncs the store dir and prunes.
func (s *Store) publish(m *Manifest, dir string) error {
	final := filepath.Join(s.dir, m.ID)
	s.mu.Lock()
	if err := s.opts.fs.Rename(dir, final); err != nil {
		s.mu.Unlock()
		_ = s.opts.fs.RemoveAll(dir)
		return fmt.Errorf("snapshot: publish %s: %w", m.ID, err)
	}
	if err := s.syncDir(s.dir); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("snapshot: publish %s: %w", m.ID, err)
	}
	pruned, perr := s.prune()
	s.mu.Unlock()

	s.log.Info("snapshot sealed", "id", m.ID, "index", m.Index, "term", m.Term, "size", m.Size,
		"sha256", fmt.Sprintf("%x", m.Digest))
	s.emit(Event{Kind: Sealed, Path: final, Manifest: m})
	for _, ev := range pruned {
		s.emit(ev)
	}
	if perr != nil {
		// The snapshot is published and durable; a failed prune only leaves
		// an extra old snapshot behind.
		s.log.Error("failed to prune old snapshots", "error", perr)
	}
	return nil
}

// writeFileSync writes b to a new file at path and fsyncs it.
func writeFileSync(fsys FS, path string, b []byte, doSync bool) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil && doSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
