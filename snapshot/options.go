package snapshot

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// EventKind says what happened to a snapshot.
type EventKind int

const (
	// Sealed: a candidate passed the gate and was published. Manifest is set.
	Sealed EventKind = iota + 1
	// Rejected: the gate refused a candidate at seal; nothing was published.
	// Err is the *GateError; Manifest is the manifest that was sealed.
	Rejected
	// Pruned: a published snapshot was removed by retention. Manifest is set.
	Pruned
	// Refused: a published snapshot failed verification on List or Open and
	// was not returned. Err is a *GateError or *ManifestError; Path names
	// the snapshot directory.
	Refused
)

func (k EventKind) String() string {
	switch k {
	case Sealed:
		return "sealed"
	case Rejected:
		return "rejected"
	case Pruned:
		return "pruned"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event reports a snapshot being sealed, rejected, pruned or refused. It
// never carries artifact contents.
type Event struct {
	Kind     EventKind
	Path     string    // the snapshot's directory (for Rejected: where it was kept, or its candidate dir)
	Manifest *Manifest // nil when the manifest is unreadable
	Err      error     // *GateError or *ManifestError for Rejected and Refused
}

// Option configures Open.
type Option func(*options) error

type options struct {
	retain       int
	keepRejected int
	logger       hclog.Logger
	onEvent      func(Event)
	sync         bool
	fs           FS

	// gateHook runs after the manifest is sealed and before the gate re-reads
	// the candidate. Tests use it to alter the artifact; nil in production.
	gateHook func(c candidate)
}

func defaultOptions() options {
	return options{retain: 2, keepRejected: 3, sync: true, fs: OSFS{}}
}

// WithRetain keeps the newest n published snapshots (default 2, n >= 1).
func WithRetain(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: retain %d, must be at least 1", ErrInvalidOption, n)
		}
		o.retain = n
		return nil
	}
}

// WithKeepRejected bounds how many rejected candidates are kept on disk for
// post-mortem (default 3; 0 keeps none, only the diagnostic in the error,
// the event and the log).
func WithKeepRejected(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("%w: keep rejected %d, must not be negative", ErrInvalidOption, n)
		}
		o.keepRejected = n
		return nil
	}
}

// WithLogger sets the logger (default: hclog named "snapshot" on stderr).
// The store logs paths, sizes, digests and IDs, never contents.
func WithLogger(l hclog.Logger) Option {
	return func(o *options) error {
		o.logger = l
		return nil
	}
}

// WithEvents registers fn to receive events. fn is called synchronously on
// the goroutine that caused the event (Close, List, Open), with no store
// lock held; it must not block for long.
func WithEvents(fn func(Event)) Option {
	return func(o *options) error {
		o.onEvent = fn
		return nil
	}
}

// WithSync turns fsync of artifacts, manifests and directories on or off
// (default on). Off is only for tests and benchmarks of throwaway data: a
// snapshot sealed without fsync may be lost or torn by a power failure.
func WithSync(on bool) Option {
	return func(o *options) error {
		o.sync = on
		return nil
	}
}

// WithFS makes the store do all its IO through fsys (default OSFS): in
// tests, a fault injector such as wal/faultfs, whose power loss then covers
// the store's files and directories. nil is refused.
func WithFS(fsys FS) Option {
	return func(o *options) error {
		if fsys == nil {
			return fmt.Errorf("%w: nil file system", ErrInvalidOption)
		}
		o.fs = fsys
		return nil
	}
}

// candidate names the files of a snapshot under construction.
type candidate struct {
	ID       string
	Dir      string
	Artifact string
	Manifest string
}

// withGateHook installs the test seam run between sealing and the gate's
// re-read.
func withGateHook(fn func(candidate)) Option {
	return func(o *options) error {
		o.gateHook = fn
		return nil
	}
}
