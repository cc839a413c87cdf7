package wal

import "github.com/hashicorp/go-hclog"

// Option configures Open.
type Option func(*options)

type options struct {
	fs           FS
	segmentSize  int64
	prealloc     int64
	cacheSize    int
	logger       hclog.Logger
	repair       bool
	requireStamp bool
	onRefusal    func(error)
	onFailure    func(class string)
}

func defaultOptions() options {
	return options{
		fs:          OSFS{},
		segmentSize: 64 << 20,
		prealloc:    512 << 10,
		cacheSize:   512,
		logger:      hclog.NewNullLogger(),
	}
}

// WithFS makes the log do its IO through fs (in tests, a fault injector
// such as wal/faultfs).
func WithFS(fs FS) Option { return func(o *options) { o.fs = fs } }

// WithSegmentSize sets the size after which the log starts a new segment
// file (default 64 MiB, at most 1 GiB). A batch is never split across
// segments.
func WithSegmentSize(n int64) Option {
	return func(o *options) { o.segmentSize = n } // clamped by segment.Open
}

// WithCacheSize sets how many recently stored entries are kept in memory for
// reads (default 512; 0 disables). Cached entries were verified when stored
// and their stamps are verified again on every read.
func WithCacheSize(n int) Option { return func(o *options) { o.cacheSize = max(n, 0) } }

// WithLogger sets the logger (default: discard).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.logger = l } }

// Repair makes Open cut the log at the first damaged record instead of
// refusing to open; Log.Repaired reports what was cut. Only an operator
// should ask for this: the cut entries must be fetched again from peers.
func Repair() Option { return func(o *options) { o.repair = true } }

// RequireStamp refuses command entries that arrive without a proposal stamp
// (ErrUnstamped). The jobraft node sets it: every command its leader proposes
// is stamped, so an unstamped command came through some other path.
func RequireStamp() Option { return func(o *options) { o.requireStamp = true } }

// OnRefusal calls fn (synchronously, without locks held by the caller's
// goroutine beyond the log's own) with every guard refusal, after it is
// counted. The node turns these into events.
func OnRefusal(fn func(error)) Option { return func(o *options) { o.onRefusal = fn } }

// WithPrealloc sets how many zero bytes the log writes ahead of its tail
// (default 512 KiB; 0 disables). Overwriting preallocated blocks lets each
// batch's fsync skip the file-size metadata update: on ext4 it roughly
// halves fsync latency. The zeros are written when a batch reaches past
// them, and that batch's fsync writes them out too, so a chunk is a stall
// of its own: 512 KiB measured faster than 4 MiB (fewer long fsyncs), 128
// KiB and none (docs/wal.md, "Preallocation"). Zeros at the end of a
// segment are read as "not written yet", never as damage.
func WithPrealloc(n int64) Option { return func(o *options) { o.prealloc = max(n, 0) } }

// OnFailure sets fn, called once when the log fails closed (every further
// write then returns ErrFailed until the log is reopened), with the
// failure's class (FailSync, FailWrite, FailNoSpace). It runs on the
// failing writer's goroutine with the log's write lock held: it must be
// quick and must not call the log.
func OnFailure(fn func(class string)) Option { return func(o *options) { o.onFailure = fn } }
