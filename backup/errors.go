package backup

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels. Compare with errors.Is.
var (
	// ErrCorrupt is matched by every *CorruptError: a backup file whose
	// bytes are not what was sealed (a header that does not decode or fails
	// its CRC, an artifact of another size or digest than its manifest, a
	// state that does not verify to the manifest's state digest, trailing
	// bytes). Returned by Decode, Verify, VerifyFile,
	// Restore and the Reader.
	ErrCorrupt = errors.New("backup: corrupt")

	// ErrInvalidManifest is returned by Encode for a manifest that fails
	// Validate (a programming error of the writer).
	ErrInvalidManifest = errors.New("backup: invalid manifest")
)

// CorruptError lists every problem found in a backup file. It carries
// sizes, offsets and hex digests, never contents.
type CorruptError struct {
	Problems []string
}

func (e *CorruptError) Error() string {
	return "backup: corrupt: " + strings.Join(e.Problems, "; ")
}

// Is matches ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(problems ...string) error { return &CorruptError{Problems: problems} }

func corruptf(format string, args ...any) error { return corrupt(fmt.Sprintf(format, args...)) }
