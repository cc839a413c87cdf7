package snapshot

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func validManifest() *Manifest {
	return &Manifest{
		FormatVersion:      FormatVersion,
		ID:                 "3-42-1700000000000",
		SnapshotVersion:    1,
		Index:              42,
		Term:               3,
		Configuration:      testConfiguration(),
		ConfigurationIndex: 40,
		Size:               1234,
		Digest:             sha256.Sum256([]byte("artifact")),
		Created:            time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := validManifest()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:4]) != "JRSM" || binary.BigEndian.Uint16(b[4:]) != 1 {
		t.Fatalf("header %x", b[:headerLen])
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !equalManifest(got, m) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
}

func TestManifestValidateReportsEveryProblem(t *testing.T) {
	m := &Manifest{
		ID:                 "x",
		ConfigurationIndex: 5,
		Size:               -1,
		Configuration: raft.Configuration{Servers: []raft.Server{
			{Suffrage: 9, ID: "", Address: ""},
			{ID: "a", Address: "1"}, {ID: "a", Address: "2"},
		}},
	}
	err := m.Validate()
	var me *ManifestError
	if !errors.As(err, &me) || !errors.Is(err, ErrManifestInvalid) || !IsCorrupt(err) {
		t.Fatalf("Validate = %v", err)
	}
	for _, want := range []string{"format version", "snapshot version", "index is 0", "term is 0",
		"configuration index 5", "size -1", "created time", `id "x"`, "suffrage 9", "empty id",
		"empty address", `repeats id "a"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q: %v", want, err)
		}
	}
	if _, err := m.Encode(); !errors.Is(err, ErrManifestInvalid) {
		t.Fatalf("Encode of an invalid manifest = %v", err)
	}
	bad := validManifest()
	bad.ID = "3-43-1700000000000" // index in the ID differs from Index
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "does not start with") {
		t.Fatalf("ID/index mismatch: %v", err)
	}
}

// reframe builds a manifest file around body with a correct header.
func reframe(body []byte) []byte {
	out := make([]byte, headerLen, headerLen+len(body))
	copy(out, manifestMagic)
	binary.BigEndian.PutUint16(out[4:], FormatVersion)
	binary.BigEndian.PutUint32(out[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(out[12:], crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

func TestDecodeManifestRefusals(t *testing.T) {
	good, err := validManifest().Encode()
	if err != nil {
		t.Fatal(err)
	}
	body := good[headerLen:]
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "header needs"},
		{"short", good[:10], "header needs"},
		{"magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"version", mutate(func(b []byte) []byte { b[5] = 2; return b }), "format version 2"},
		{"flags", mutate(func(b []byte) []byte { b[7] = 1; return b }), "flags"},
		{"length", mutate(func(b []byte) []byte { b[11]++; return b }), "body length"},
		{"crc", mutate(func(b []byte) []byte { b[len(b)-2] ^= 0x20; return b }), "crc32c"},
		{"trailing garbage", append(append([]byte(nil), good...), '!'), "body length"},
		{"not json", reframe([]byte("not json")), "does not decode"},
		{"unknown field", reframe([]byte(`{"id":"1-1-1","extra":1}`)), "unknown field"},
		{"two objects", reframe(append(append([]byte(nil), body...), body...)), "trailing data"},
		{"bad digest", reframe([]byte(strings.Replace(string(body), `"digest_sha256":"`, `"digest_sha256":"zz`, 1))), "digest_sha256"},
		{"bad time", reframe([]byte(strings.Replace(string(body), `"created":"`, `"created":"yesterday`, 1))), "created"},
		{"bad configuration", reframe([]byte(strings.Replace(string(body), `"configuration":"`, `"configuration":"AAAA`, 1))), "configuration"},
		{"invalid values", reframe([]byte(strings.Replace(string(body), `"index":42`, `"index":0`, 1))), "index is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeManifest(tc.in)
			var me *ManifestError
			if m != nil || !errors.As(err, &me) || !IsCorrupt(err) {
				t.Fatalf("DecodeManifest = %v, %v; want *ManifestError", m, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeManifest: no input panics the decoder; every refusal is a
// *ManifestError; whatever is accepted is valid and re-encodes to itself.
// Inputs are tried as whole files and as bodies inside a correct frame, so
// the fuzzer reaches the JSON and configuration decoders past the CRC.
func FuzzDecodeManifest(f *testing.F) {
	good, err := validManifest().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[headerLen:])
	f.Add([]byte{})
	f.Add([]byte(`{"id":"1-1-1","snapshot_version":1,"index":1,"term":1,"configuration":"gapTZXJ2ZXJzwA==","configuration_index":0,"size":0,"digest_sha256":"","created":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, reframe(data)} {
			m, err := DecodeManifest(in)
			if err != nil {
				var me *ManifestError
				if m != nil || !errors.As(err, &me) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeManifest refusal is %T %v with manifest %v", err, err, m)
				}
				continue
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("accepted an invalid manifest: %v", err)
			}
			again, err := m.Encode()
			if err != nil {
				t.Fatalf("accepted manifest does not re-encode: %v", err)
			}
			m2, err := DecodeManifest(again)
			if err != nil || !equalManifest(m, m2) {
				t.Fatalf("re-encoded manifest decodes to %+v, %v; want %+v", m2, err, m)
			}
		}
	})
}
