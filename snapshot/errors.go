package snapshot

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels, grouped by the operation that returns them. Compare with
// errors.Is; the diagnostics below (*GateError, *ManifestError) match the
// sentinels they name.
var (
	// ErrInvalidOption is returned by Open(dir) for an option out of range
	// (WithRetain(0), WithKeepRejected(-1)).
	ErrInvalidOption = errors.New("snapshot: invalid option")

	// ErrUnsupportedVersion is returned by Store.Create for a raft snapshot
	// version other than 1 (version 0 needs the deprecated Peers blob, which
	// this store does not write).
	ErrUnsupportedVersion = errors.New("snapshot: unsupported raft snapshot version")

	// ErrInvalidMeta is returned by Store.Create when the index, term or
	// configuration raft hands over would not make a valid manifest.
	ErrInvalidMeta = errors.New("snapshot: invalid snapshot metadata")

	// ErrSinkClosed is returned by a sink's Write after Close or Cancel.
	ErrSinkClosed = errors.New("snapshot: sink already closed")

	// ErrGateRejected is matched by every *GateError: the artifact on disk
	// differs from its manifest. Returned by the sink's Close (the candidate
	// was rejected and not published), by Store.Open (the artifact's length
	// differs: no byte was handed out) and by its reader (the artifact
	// differs: its final bytes were withheld).
	ErrGateRejected = errors.New("snapshot: consistency gate rejected the artifact")

	// ErrNotFound is returned by Store.Open for an ID that names no
	// published snapshot.
	ErrNotFound = errors.New("snapshot: not found")

	// ErrManifestInvalid is matched by every *ManifestError: a manifest that
	// does not decode or fails Manifest.Validate. Returned by DecodeManifest,
	// Manifest.Validate and Store.Open; Store.List skips such snapshots.
	ErrManifestInvalid = errors.New("snapshot: invalid manifest")

	// ErrCorrupt is the corruption class: matched by *GateError and
	// *ManifestError alike. Use IsCorrupt.
	ErrCorrupt = errors.New("snapshot: corrupt")
)

// IsCorrupt reports whether err says that bytes on disk are not what was
// sealed (an artifact that differs from its manifest, or a manifest that
// fails its own checks), as opposed to an I/O or usage error.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// Gate operations recorded in GateError.Op.
const (
	// OpSeal is the gate run by the sink's Close before publication.
	OpSeal = "seal"
	// OpOpen is the check of a published snapshot by Store.Open (its
	// length) and by its reader (length and digest, before the final bytes
	// are handed out).
	OpOpen = "open"
)

// GateError is the diagnostic of a consistency gate refusal: the artifact
// re-read from disk differs from its manifest (or could not be re-read, or
// the manifest re-read from disk is not the one sealed). It carries paths,
// sizes, digests and equality flags — never contents — so that one
// occurrence is enough to name the mechanism.
type GateError struct {
	Op    string `json:"op"` // OpSeal or OpOpen
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`

	Dir          string `json:"dir"`           // candidate (or published) directory when checked
	ArtifactPath string `json:"artifact_path"` // artifact file when checked
	ManifestPath string `json:"manifest_path"` // manifest file when checked
	// KeptDir is where a rejected candidate was kept for post-mortem
	// (OpSeal only; empty if keeping failed or is disabled).
	KeptDir string `json:"kept_dir,omitempty"`

	ManifestSize   int64  `json:"manifest_size"`
	ArtifactSize   int64  `json:"artifact_size"`   // bytes read back from disk (List: file length); -1 if unreadable
	ManifestDigest string `json:"manifest_digest"` // hex SHA-256
	ArtifactDigest string `json:"artifact_digest"` // hex SHA-256 of the bytes read back; "" if none could be read
	SizeEqual      bool   `json:"size_equal"`
	DigestEqual    bool   `json:"digest_equal"`
	// ManifestIntact is false when the manifest re-read from disk does not
	// decode or differs from the one sealed (OpSeal), or fails validation.
	ManifestIntact bool `json:"manifest_intact"`

	// Cause is a read error during verification (nil for a pure mismatch).
	Cause error `json:"-"`
	// CauseText is Cause.Error(), kept for the on-disk diagnostic.
	CauseText string `json:"cause,omitempty"`
}

func (e *GateError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapshot: consistency gate rejected %s at %s (index %d, term %d): ", e.ID, e.Op, e.Index, e.Term)
	var why []string
	if !e.ManifestIntact {
		why = append(why, "manifest not intact")
	}
	if !e.SizeEqual {
		why = append(why, fmt.Sprintf("size manifest=%d artifact=%d", e.ManifestSize, e.ArtifactSize))
	}
	if !e.DigestEqual {
		artifact := e.ArtifactDigest
		if artifact == "" {
			artifact = "(not read)"
		}
		why = append(why, fmt.Sprintf("sha256 manifest=%s artifact=%s", e.ManifestDigest, artifact))
	}
	if e.Cause != nil {
		why = append(why, "read error: "+e.Cause.Error())
	}
	if len(why) == 0 {
		why = append(why, "mismatch")
	}
	b.WriteString(strings.Join(why, "; "))
	fmt.Fprintf(&b, " [artifact %s]", e.ArtifactPath)
	if e.KeptDir != "" {
		fmt.Fprintf(&b, " [kept in %s]", e.KeptDir)
	}
	return b.String()
}

// Is matches ErrGateRejected and ErrCorrupt.
func (e *GateError) Is(target error) bool { return target == ErrGateRejected || target == ErrCorrupt }

// Unwrap returns the read error, if any.
func (e *GateError) Unwrap() error { return e.Cause }

// ManifestError reports every problem found in one manifest (not only the
// first). It never carries artifact contents.
type ManifestError struct {
	Path     string   // manifest file, when known
	Problems []string // each a short description, e.g. "index is 0"
}

func (e *ManifestError) Error() string {
	where := ""
	if e.Path != "" {
		where = " " + e.Path
	}
	return fmt.Sprintf("snapshot: invalid manifest%s: %s", where, strings.Join(e.Problems, "; "))
}

// Is matches ErrManifestInvalid and ErrCorrupt.
func (e *ManifestError) Is(target error) bool {
	return target == ErrManifestInvalid || target == ErrCorrupt
}

func manifestErr(problems ...string) *ManifestError { return &ManifestError{Problems: problems} }
