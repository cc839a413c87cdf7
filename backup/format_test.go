package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/snapshot"
)

// sample builds a valid backup of artifact.
func sample(t testing.TB, artifact []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(artifact)
	sm := &snapshot.Manifest{FormatVersion: snapshot.FormatVersion, ID: "3-10-1000", SnapshotVersion: 1, Index: 10, Term: 3,
		Configuration: raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:1"}}},
		Size:          int64(len(artifact)), Digest: sum, Created: time.Unix(1, 0).UTC()}
	smb, err := sm.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{ClusterID: "c", Member: "n1", Index: 10, Term: 3, Jobs: 1, StateDigest: hex.EncodeToString(sum[:]),
		Size: int64(len(artifact)), SHA256: hex.EncodeToString(sum[:]), Snapshot: smb, Created: time.Unix(2, 0).UTC()}
	var buf bytes.Buffer
	if err := Encode(&buf, m, bytes.NewReader(artifact)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	art := bytes.Repeat([]byte("state"), 1000)
	m, err := Verify(bytes.NewReader(sample(t, art)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Index != 10 || m.Size != int64(len(art)) || m.ClusterID != "c" {
		t.Fatalf("manifest %+v", m)
	}
	_, r, err := Decode(bytes.NewReader(sample(t, art)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, art) {
		t.Fatalf("artifact: %d bytes, %v", len(got), err)
	}
}

// Every single-byte change anywhere in the file is refused as corrupt.
func TestEveryFlipIsRefused(t *testing.T) {
	good := sample(t, bytes.Repeat([]byte{7}, 300))
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		if _, err := Verify(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at byte %d of %d: %v, want ErrCorrupt", i, len(good), err)
		}
	}
}

// Encode refuses an artifact that is not what the manifest says.
func TestEncodeChecksTheArtifact(t *testing.T) {
	art := []byte("abc")
	good := sample(t, art)
	m, _, err := Decode(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := Encode(io.Discard, m, bytes.NewReader([]byte("abd"))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("encode of another artifact: %v", err)
	}
	m.Index = 0
	if err := Encode(io.Discard, m, bytes.NewReader(art)); !errors.Is(err, ErrInvalidManifest) {
		t.Fatalf("encode of an invalid manifest: %v", err)
	}
}

// Decoding never panics and refuses anything that is not a valid backup.
func FuzzDecode(f *testing.F) {
	f.Add(sample(f, []byte("x")))
	f.Add([]byte("JRBACKUP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Verify(bytes.NewReader(b))
		if err == nil && m == nil {
			t.Fatal("nil manifest without error")
		}
	})
}
