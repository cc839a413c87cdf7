package snapshot

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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

// withheld is how many final bytes of an artifact a reader of Store.Open
// keeps back until the whole artifact has been read and checked (all of
// it when it is shorter).
const withheld = 64 << 10

// verifyingReader hands out an artifact as it reads it from disk and
// checks it on the way: it hashes every byte and withholds the final ones
// (withheld) until it has read the file to its end and found its size and
// SHA-256 equal to the manifest's. Only then does it hand them out, and
// io.EOF after them. If they differ, or the file cannot be read, or it
// runs past the manifest's size, Read returns a *GateError instead (and
// again on every later call): the withheld bytes are never handed out, so
// no consumer receives the whole of an artifact that differs from its
// manifest.
type verifyingReader struct {
	f    File
	br   *bufio.Reader
	h    hash.Hash
	read int64 // bytes read from the file (all hashed)
	free int64 // bytes handed out before the check: m.Size - withheld
	m    *Manifest
	diag *GateError       // template for a mismatch
	fail func(*GateError) // told of a mismatch once (the store's report)
	tail []byte           // checked final bytes not yet handed out
	ok   bool             // the whole artifact was read and matched
	err  error            // sticky: io.EOF, or the *GateError
}

func newVerifyingReader(f File, m *Manifest, diag *GateError, fail func(*GateError)) *verifyingReader {
	return &verifyingReader{f: f, br: bufio.NewReaderSize(fileReader(f), 1<<20), h: sha256.New(),
		free: max(m.Size-withheld, 0), m: m, diag: diag, fail: fail}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	switch {
	case v.err != nil:
		return 0, v.err
	case v.ok:
		n := copy(p, v.tail)
		if v.tail = v.tail[n:]; len(v.tail) == 0 {
			v.err = io.EOF
		}
		return n, nil
	case len(p) == 0:
		return 0, nil
	case v.read < v.free:
		n, err := v.br.Read(p[:min(int64(len(p)), v.free-v.read)])
		_, _ = v.h.Write(p[:n])
		v.read += int64(n)
		if err != nil {
			// Shorter than the manifest (io.EOF) or unreadable: refused,
			// with what was read so far.
			return n, v.refuse(err)
		}
		return n, nil
	}
	if err := v.check(); err != nil {
		return 0, err
	}
	return v.Read(p)
}

// check reads the rest of the file (the withheld bytes, and whatever runs
// past them) and compares the whole with the manifest.
func (v *verifyingReader) check() error {
	tail := make([]byte, v.m.Size-v.read)
	n, err := io.ReadFull(v.br, tail)
	_, _ = v.h.Write(tail[:n])
	v.read += int64(n)
	if err != nil {
		return v.refuse(err) // shorter than the manifest, or unreadable
	}
	// Whatever follows the manifest's size is read (and hashed) to report
	// the artifact's real length; it fails the check.
	past, err := io.Copy(v.h, v.br)
	v.read += past
	if err != nil {
		return v.refuse(err)
	}
	if g := v.mismatch(nil); g != nil {
		return v.refused(g)
	}
	v.tail, v.ok = tail, true
	return nil
}

// refuse ends the reader with the diagnostic of what was read so far, rerr
// the read error (io.EOF: the file ended early) that stopped it.
func (v *verifyingReader) refuse(rerr error) error {
	if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
		rerr = nil
	}
	g := v.mismatch(rerr)
	if g == nil { // cannot happen: the file ended before the manifest's size
		g = v.mismatch(io.ErrUnexpectedEOF)
	}
	return v.refused(g)
}

func (v *verifyingReader) refused(g *GateError) error {
	v.err = g
	if v.fail != nil {
		v.fail(g)
	}
	return g
}

// mismatch returns a diagnostic if what was read differs from the manifest
// (or rerr, a read error, stopped it), nil if it matches.
func (v *verifyingReader) mismatch(rerr error) *GateError {
	var sum [sha256.Size]byte
	v.h.Sum(sum[:0])
	if rerr == nil && v.read == v.m.Size && sum == v.m.Digest {
		return nil
	}
	g := *v.diag
	g.ManifestIntact = true
	g.ArtifactSize = v.read
	g.ArtifactDigest = hex.EncodeToString(sum[:])
	g.SizeEqual = v.read == v.m.Size
	g.DigestEqual = sum == v.m.Digest
	if rerr != nil {
		g.Cause, g.CauseText = rerr, rerr.Error()
	}
	return &g
}

func (v *verifyingReader) Close() error { return v.f.Close() }
