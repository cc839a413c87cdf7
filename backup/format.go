package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"

	"github.com/jobraft/jobraft/snapshot"
)

// FormatVersion is the backup format this package writes and reads.
const FormatVersion uint16 = 1

const (
	magic       = "JRBACKUP"
	headerLen   = 20
	maxManifest = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest describes one backup. Field names in JSON are part of the
// format.
type Manifest struct {
	// ClusterID names the cluster the backup was taken from ("" when the
	// host did not give one). A cluster restored from it must use another.
	ClusterID string `json:"cluster_id"`
	// Member is the member that took the backup.
	Member string `json:"member"`
	// Index is the applied index of the state in the artifact: every
	// entry committed before the backup began is at or below it.
	Index uint64 `json:"index"`
	// Term is the member's term when the backup was taken.
	Term uint64 `json:"term"`
	// Jobs is the number of jobs in the state.
	Jobs int `json:"jobs"`
	// StateDigest is the state machine's digest at Index (hex SHA-256):
	// a restored member reports the same digest at the same index.
	StateDigest string `json:"state_digest"`
	// Size and SHA256 (hex) describe the artifact.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Snapshot is the snapshot package's sealed manifest for the artifact
	// (snapshot.Manifest.Encode): the same index, size and digest.
	Snapshot []byte    `json:"snapshot_manifest"`
	Created  time.Time `json:"created"`
}

// Validate checks the manifest's own fields and their agreement with the
// embedded snapshot manifest, and lists every problem.
func (m *Manifest) Validate() error {
	var p []string
	if m.Index == 0 {
		p = append(p, "index is 0")
	}
	if m.Term == 0 {
		p = append(p, "term is 0")
	}
	if m.Jobs < 0 {
		p = append(p, fmt.Sprintf("jobs %d is negative", m.Jobs))
	}
	if b, err := hex.DecodeString(m.StateDigest); err != nil || len(b) != sha256.Size {
		p = append(p, fmt.Sprintf("state digest %q is not 64 hex digits", m.StateDigest))
	}
	if b, err := hex.DecodeString(m.SHA256); err != nil || len(b) != sha256.Size {
		p = append(p, fmt.Sprintf("sha256 %q is not 64 hex digits", m.SHA256))
	}
	if m.Size <= 0 {
		p = append(p, fmt.Sprintf("size %d is not positive", m.Size))
	}
	if m.Created.IsZero() {
		p = append(p, "created time is zero")
	}
	sm, err := snapshot.DecodeManifest(m.Snapshot)
	if err != nil {
		p = append(p, "embedded snapshot manifest: "+err.Error())
	} else {
		if sm.Index != m.Index {
			p = append(p, fmt.Sprintf("snapshot manifest index %d, backup index %d", sm.Index, m.Index))
		}
		if sm.Size != m.Size {
			p = append(p, fmt.Sprintf("snapshot manifest size %d, backup size %d", sm.Size, m.Size))
		}
		if hex.EncodeToString(sm.Digest[:]) != m.SHA256 {
			p = append(p, fmt.Sprintf("snapshot manifest sha256 %x, backup sha256 %s", sm.Digest, m.SHA256))
		}
	}
	if len(p) > 0 {
		return corrupt(p...)
	}
	return nil
}

// Encode writes the header and manifest, then copies exactly m.Size bytes
// of artifact, checking them against m.SHA256 as they pass; a mismatch is
// an error (what was written must then be discarded).
func Encode(w io.Writer, m *Manifest, artifact io.Reader) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("backup: encode manifest: %w", err)
	}
	if len(body) > maxManifest {
		return fmt.Errorf("%w: manifest of %d bytes, limit %d", ErrInvalidManifest, len(body), maxManifest)
	}
	hdr := make([]byte, headerLen, headerLen+len(body))
	copy(hdr, magic)
	binary.BigEndian.PutUint16(hdr[8:], FormatVersion)
	binary.BigEndian.PutUint32(hdr[12:], uint32(len(body)))
	binary.BigEndian.PutUint32(hdr[16:], crc32.Checksum(body, castagnoli))
	if _, err := w.Write(append(hdr, body...)); err != nil {
		return err
	}
	vr := &verifyingReader{r: artifact, m: m, h: sha256.New()}
	if _, err := io.Copy(w, vr); err != nil {
		return err
	}
	return nil
}

// Decode reads and checks the header and manifest and returns a reader of
// the artifact. The reader checks size and SHA-256 as it is read and
// returns a *CorruptError instead of io.EOF when they differ or when bytes
// follow the artifact.
func Decode(r io.Reader) (*Manifest, io.Reader, error) {
	hdr := make([]byte, headerLen)
	if n, err := io.ReadFull(r, hdr); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, corruptf("file is %d bytes, the header needs %d", n, headerLen)
		}
		return nil, nil, err
	}
	var p []string
	if string(hdr[:8]) != magic {
		p = append(p, fmt.Sprintf("magic is %q, want %q (not a jobraft backup)", hdr[:8], magic))
	}
	if v := binary.BigEndian.Uint16(hdr[8:]); v != FormatVersion {
		p = append(p, fmt.Sprintf("format version %d unsupported (want %d)", v, FormatVersion))
	}
	if f := binary.BigEndian.Uint16(hdr[10:]); f != 0 {
		p = append(p, fmt.Sprintf("flags %#x, want 0", f))
	}
	n := binary.BigEndian.Uint32(hdr[12:])
	if n == 0 || n > maxManifest {
		p = append(p, fmt.Sprintf("manifest length %d out of (0, %d]", n, maxManifest))
	}
	if len(p) > 0 {
		return nil, nil, corrupt(p...)
	}
	body := make([]byte, n)
	if got, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, corruptf("manifest truncated: %d of %d bytes", got, n)
		}
		return nil, nil, err
	}
	if want, got := binary.BigEndian.Uint32(hdr[16:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, nil, corruptf("manifest crc32c %08x, header says %08x", got, want)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, nil, corruptf("manifest does not decode: %v", err)
	}
	if dec.More() {
		return nil, nil, corrupt("trailing data after the manifest object")
	}
	if err := m.Validate(); err != nil {
		return nil, nil, err
	}
	return &m, &verifyingReader{r: r, m: &m, h: sha256.New(), trailing: true}, nil
}

// Verify reads a whole backup and checks everything but the state digest
// (which needs the state machine: jobraft.Restore checks it).
func Verify(r io.Reader) (*Manifest, error) {
	m, ar, err := Decode(r)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, ar); err != nil {
		return nil, err
	}
	return m, nil
}

// verifyingReader passes exactly m.Size bytes of r and checks their
// SHA-256 at the end; with trailing, it also requires r to end there.
type verifyingReader struct {
	r        io.Reader
	m        *Manifest
	h        hash.Hash
	n        int64
	trailing bool
	done     error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.done != nil {
		return 0, v.done
	}
	if rest := v.m.Size - v.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) > 0 {
		n, err := v.r.Read(p)
		v.h.Write(p[:n])
		v.n += int64(n)
		switch {
		case errors.Is(err, io.EOF) && v.n < v.m.Size:
			v.done = corruptf("artifact truncated: %d of %d bytes", v.n, v.m.Size)
			return n, v.done
		case err != nil && !errors.Is(err, io.EOF):
			return n, err
		}
		if n > 0 || v.n < v.m.Size {
			return n, nil
		}
	}
	v.done = v.finish()
	return 0, v.done
}

func (v *verifyingReader) finish() error {
	var p []string
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.m.SHA256 {
		p = append(p, fmt.Sprintf("artifact sha256 %s, manifest says %s", got, v.m.SHA256))
	}
	if v.trailing {
		var one [1]byte
		if n, _ := io.ReadFull(v.r, one[:]); n > 0 {
			p = append(p, fmt.Sprintf("bytes follow the artifact's %d bytes", v.m.Size))
		}
	}
	if len(p) > 0 {
		return corrupt(p...)
	}
	return io.EOF
}
