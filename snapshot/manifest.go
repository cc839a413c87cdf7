package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"regexp"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion uint16 = 1

const (
	manifestMagic   = "JRSM"
	headerLen       = 16
	maxManifestBody = 1 << 20 // a configuration of thousands of servers fits
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// idPattern is the shape of a published snapshot's ID and directory name:
// term-index-unixmilli, with an optional -N to break collisions.
var idPattern = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}-[0-9]{1,20}(-[0-9]{1,9})?$`)

// Manifest seals one snapshot: what raft asked for (index, term,
// configuration) and what was written (size and SHA-256 of the artifact,
// computed while the bytes were streamed into the sink).
type Manifest struct {
	FormatVersion      uint16               // FormatVersion when written by this package
	ID                 string               // directory name; term-index-unixmilli[-N]
	SnapshotVersion    raft.SnapshotVersion // raft's snapshot metadata version (1)
	Index              uint64               // last raft index covered
	Term               uint64               // term of Index
	Configuration      raft.Configuration   // committed configuration at ConfigurationIndex
	ConfigurationIndex uint64
	Size               int64             // artifact length in bytes
	Digest             [sha256.Size]byte // SHA-256 of the artifact
	Created            time.Time         // wall clock of the sealing member, UTC
}

// manifestBody is the JSON body of the manifest file. Field names are part
// of the on-disk format.
type manifestBody struct {
	ID                 string `json:"id"`
	SnapshotVersion    int    `json:"snapshot_version"`
	Index              uint64 `json:"index"`
	Term               uint64 `json:"term"`
	Configuration      []byte `json:"configuration"` // raft.EncodeConfiguration (msgpack), base64 in JSON
	ConfigurationIndex uint64 `json:"configuration_index"`
	Size               int64  `json:"size"`
	DigestSHA256       string `json:"digest_sha256"` // lower-case hex
	Created            string `json:"created"`       // RFC 3339 with nanoseconds, UTC
}

// Encode returns the manifest file's bytes. Layout (integers big-endian):
//
//	offset  size  field
//	0       4     magic "JRSM"
//	4       2     format version (1)
//	6       2     flags, must be 0
//	8       4     body length n, 0 < n <= 1 MiB
//	12      4     CRC-32C (Castagnoli) of the body
//	16      n     body: JSON object (manifestBody), nothing after it
//
// Encode refuses a manifest that fails Validate.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(manifestBody{
		ID:                 m.ID,
		SnapshotVersion:    int(m.SnapshotVersion),
		Index:              m.Index,
		Term:               m.Term,
		Configuration:      raft.EncodeConfiguration(m.Configuration),
		ConfigurationIndex: m.ConfigurationIndex,
		Size:               m.Size,
		DigestSHA256:       hex.EncodeToString(m.Digest[:]),
		Created:            m.Created.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: encode manifest %s: %w", m.ID, err)
	}
	if len(body) > maxManifestBody {
		return nil, manifestErr(fmt.Sprintf("body is %d bytes, limit %d", len(body), maxManifestBody))
	}
	out := make([]byte, headerLen, headerLen+len(body))
	copy(out, manifestMagic)
	binary.BigEndian.PutUint16(out[4:], m.FormatVersion)
	binary.BigEndian.PutUint32(out[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(out[12:], crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

// DecodeManifest parses and validates a manifest file. Every failure is a
// *ManifestError (errors.Is ErrManifestInvalid and ErrCorrupt); it never
// panics on any input.
func DecodeManifest(b []byte) (*Manifest, error) {
	if len(b) < headerLen {
		return nil, manifestErr(fmt.Sprintf("file is %d bytes, header needs %d", len(b), headerLen))
	}
	var problems []string
	if string(b[:4]) != manifestMagic {
		problems = append(problems, fmt.Sprintf("magic is %q, want %q", b[:4], manifestMagic))
	}
	version := binary.BigEndian.Uint16(b[4:])
	if version != FormatVersion {
		problems = append(problems, fmt.Sprintf("format version %d unsupported (want %d)", version, FormatVersion))
	}
	if flags := binary.BigEndian.Uint16(b[6:]); flags != 0 {
		problems = append(problems, fmt.Sprintf("flags %#x, want 0", flags))
	}
	n := binary.BigEndian.Uint32(b[8:])
	body := b[headerLen:]
	if n == 0 || n > maxManifestBody || int(n) != len(body) {
		problems = append(problems, fmt.Sprintf("body length field %d, file holds %d body bytes (limit %d)", n, len(body), maxManifestBody))
	}
	if want, got := binary.BigEndian.Uint32(b[12:]), crc32.Checksum(body, castagnoli); want != got {
		problems = append(problems, fmt.Sprintf("body crc32c %08x, header says %08x", got, want))
	}
	if len(problems) > 0 {
		return nil, manifestErr(problems...)
	}
	m, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	m.FormatVersion = version
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeBody parses the JSON body strictly (unknown fields, trailing data and
// malformed values are refused).
func decodeBody(body []byte) (*Manifest, error) {
	var mb manifestBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&mb); err != nil {
		return nil, manifestErr("body does not decode: " + err.Error())
	}
	if dec.More() {
		return nil, manifestErr("trailing data after body")
	}
	var problems []string
	m := &Manifest{
		ID:                 mb.ID,
		Index:              mb.Index,
		Term:               mb.Term,
		ConfigurationIndex: mb.ConfigurationIndex,
		Size:               mb.Size,
	}
	if mb.SnapshotVersion < 0 || mb.SnapshotVersion > int(raft.SnapshotVersionMax) {
		problems = append(problems, fmt.Sprintf("snapshot version %d out of range", mb.SnapshotVersion))
	} else {
		m.SnapshotVersion = raft.SnapshotVersion(mb.SnapshotVersion)
	}
	if d, err := hex.DecodeString(mb.DigestSHA256); err != nil || len(d) != sha256.Size {
		problems = append(problems, "digest_sha256 is not 64 hex digits")
	} else {
		copy(m.Digest[:], d)
	}
	if t, err := time.Parse(time.RFC3339Nano, mb.Created); err != nil {
		problems = append(problems, "created is not an RFC 3339 time")
	} else {
		m.Created = t.UTC()
	}
	if c, err := decodeConfiguration(mb.Configuration); err != nil {
		problems = append(problems, err.Error())
	} else {
		m.Configuration = c
	}
	if len(problems) > 0 {
		return nil, manifestErr(problems...)
	}
	return m, nil
}

// decodeConfiguration wraps raft.DecodeConfiguration, which panics on bad
// input: a bad manifest is bad disk, not a programmer bug.
func decodeConfiguration(b []byte) (c raft.Configuration, err error) {
	if len(b) == 0 {
		return c, fmt.Errorf("configuration is empty")
	}
	defer func() {
		if r := recover(); r != nil {
			c, err = raft.Configuration{}, fmt.Errorf("configuration does not decode")
		}
	}()
	return raft.DecodeConfiguration(b), nil
}

// Validate checks the manifest's own invariants and reports every violation
// in one *ManifestError. It does not look at the artifact.
func (m *Manifest) Validate() error {
	var p []string
	if m.FormatVersion != FormatVersion {
		p = append(p, fmt.Sprintf("format version %d, want %d", m.FormatVersion, FormatVersion))
	}
	if m.SnapshotVersion < 1 || m.SnapshotVersion > raft.SnapshotVersionMax {
		p = append(p, fmt.Sprintf("snapshot version %d, want 1..%d", m.SnapshotVersion, raft.SnapshotVersionMax))
	}
	if m.Index == 0 {
		p = append(p, "index is 0")
	}
	if m.Term == 0 {
		p = append(p, "term is 0")
	}
	if m.ConfigurationIndex > m.Index {
		p = append(p, fmt.Sprintf("configuration index %d above snapshot index %d", m.ConfigurationIndex, m.Index))
	}
	if m.Size < 0 {
		p = append(p, fmt.Sprintf("size %d is negative", m.Size))
	}
	if m.Created.IsZero() {
		p = append(p, "created time is zero")
	}
	if !idPattern.MatchString(m.ID) {
		p = append(p, fmt.Sprintf("id %q is not term-index-millis[-n]", m.ID))
	} else if prefix := strconv.FormatUint(m.Term, 10) + "-" + strconv.FormatUint(m.Index, 10) + "-"; len(m.ID) <= len(prefix) || m.ID[:len(prefix)] != prefix {
		p = append(p, fmt.Sprintf("id %q does not start with term-index %q", m.ID, prefix))
	}
	p = append(p, configurationProblems(m.Configuration)...)
	if len(p) > 0 {
		return manifestErr(p...)
	}
	return nil
}

func configurationProblems(c raft.Configuration) []string {
	var p []string
	seen := make(map[raft.ServerID]bool, len(c.Servers))
	for i, s := range c.Servers {
		switch s.Suffrage {
		case raft.Voter, raft.Nonvoter, raft.Staging:
		default:
			p = append(p, fmt.Sprintf("server %d has suffrage %d", i, s.Suffrage))
		}
		if s.ID == "" {
			p = append(p, fmt.Sprintf("server %d has an empty id", i))
		} else if seen[s.ID] {
			p = append(p, fmt.Sprintf("server %d repeats id %q", i, s.ID))
		}
		seen[s.ID] = true
		if s.Address == "" {
			p = append(p, fmt.Sprintf("server %d has an empty address", i))
		}
	}
	return p
}

// meta converts the manifest to what raft reads back from List and Open.
// Peers (deprecated, version 0 only) is left empty.
func (m *Manifest) meta() *raft.SnapshotMeta {
	return &raft.SnapshotMeta{
		Version:            m.SnapshotVersion,
		ID:                 m.ID,
		Index:              m.Index,
		Term:               m.Term,
		Configuration:      cloneConfiguration(m.Configuration),
		ConfigurationIndex: m.ConfigurationIndex,
		Size:               m.Size,
	}
}

func cloneConfiguration(c raft.Configuration) raft.Configuration {
	return raft.Configuration{Servers: append([]raft.Server(nil), c.Servers...)}
}

// newer reports whether a sorts after b: by (term, index, created, id), the
// order raft's file store uses.
func newer(a, b *Manifest) bool {
	if a.Term != b.Term {
		return a.Term > b.Term
	}
	if a.Index != b.Index {
		return a.Index > b.Index
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.After(b.Created)
	}
	return a.ID > b.ID
}

// equalManifest compares two manifests field by field.
func equalManifest(a, b *Manifest) bool {
	if a.FormatVersion != b.FormatVersion || a.ID != b.ID || a.SnapshotVersion != b.SnapshotVersion ||
		a.Index != b.Index || a.Term != b.Term || a.ConfigurationIndex != b.ConfigurationIndex ||
		a.Size != b.Size || a.Digest != b.Digest || !a.Created.Equal(b.Created) ||
		len(a.Configuration.Servers) != len(b.Configuration.Servers) {
		return false
	}
	for i := range a.Configuration.Servers {
		if a.Configuration.Servers[i] != b.Configuration.Servers[i] {
			return false
		}
	}
	return true
}
