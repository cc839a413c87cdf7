package snapshot

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path/filepath"
)

// digestReader reads r to EOF and returns how many bytes it held and their
// SHA-256. On a read error it returns what it had read so far.
func digestReader(r io.Reader) (int64, [sha256.Size]byte, error) {
	h := sha256.New()
	n, err := io.Copy(h, bufio.NewReaderSize(r, 1<<20))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return n, sum, err
}

// digestFile is digestReader over a file.
func digestFile(fsys FS, path string) (int64, [sha256.Size]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return -1, [sha256.Size]byte{}, err
	}
	defer f.Close()
	return digestReader(fileReader(f))
}

// gateError starts a diagnostic for snapshot m in dir (flags all false).
func (s *Store) gateError(op string, m *Manifest, dir string) *GateError {
	return &GateError{
		Op:             op,
		ID:             m.ID,
		Index:          m.Index,
		Term:           m.Term,
		Dir:            dir,
		ArtifactPath:   filepath.Join(dir, artifactName),
		ManifestPath:   filepath.Join(dir, manifestName),
		ManifestSize:   m.Size,
		ManifestDigest: hex.EncodeToString(m.Digest[:]),
	}
}

// check compares what was read back (size, digest, read error) with the
// manifest: the pure decision of the gate. It returns nil when they agree.
func (s *Store) check(op string, m *Manifest, dir string, size int64, digest [sha256.Size]byte, rerr error) *GateError {
	if rerr == nil && size == m.Size && digest == m.Digest {
		return nil
	}
	g := s.gateError(op, m, dir)
	g.ArtifactSize = size
	if size >= 0 {
		g.ArtifactDigest = hex.EncodeToString(digest[:])
	}
	g.SizeEqual = size == m.Size
	g.DigestEqual = digest == m.Digest
	if rerr != nil {
		g.Cause, g.CauseText = rerr, rerr.Error()
	}
	return g
}

// verifyingReader hands out a verified artifact and checks it again while it
// is read: if the bytes differ from the manifest by the time EOF is reached
// (or run past its size), Read returns a *GateError instead of io.EOF.
type verifyingReader struct {
	f    File
	br   *bufio.Reader
	h    hash.Hash
	n    int64
	m    *Manifest
	diag *GateError // template for a late mismatch
	err  error
}

func newVerifyingReader(f File, m *Manifest, diag *GateError) *verifyingReader {
	return &verifyingReader{f: f, br: bufio.NewReaderSize(fileReader(f), 1<<20), h: sha256.New(), m: m, diag: diag}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.br.Read(p)
	v.n += int64(n)
	_, _ = v.h.Write(p[:n])
	if v.n > v.m.Size {
		v.err = v.late()
		return 0, v.err
	}
	if err == io.EOF {
		if g := v.late(); g != nil {
			v.err = g
			return n, g
		}
		v.err = io.EOF
	} else if err != nil {
		v.err = err
	}
	return n, err
}

// late returns a diagnostic if what was read differs from the manifest.
func (v *verifyingReader) late() *GateError {
	var sum [sha256.Size]byte
	v.h.Sum(sum[:0])
	if v.n == v.m.Size && sum == v.m.Digest {
		return nil
	}
	g := *v.diag
	g.ManifestIntact = true
	g.ArtifactSize = v.n
	g.ArtifactDigest = hex.EncodeToString(sum[:])
	g.SizeEqual = v.n == v.m.Size
	g.DigestEqual = sum == v.m.Digest
	return &g
}

func (v *verifyingReader) Close() error { return v.f.Close() }
