// Package nodeopt holds the options of raft.Open and jobraft.Open that only
// this module's own code can pass: instrumentation and fault seams for its
// tests, kept out of the public Config types. A caller outside the module
// cannot name the Option type, so for it both Open functions take no
// options.
//
// The seams are narrow hooks, not fault types: a test wraps the member's raft
// transport and RPC caller (with transport/faultnet) or gives the log a file
// system (wal/faultfs) through them, so neither injector is linked into a
// host binary.
package nodeopt

import (
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/history"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
)

// Option sets one internal option.
type Option func(*Options)

// Options are the collected options. The zero value changes nothing.
type Options struct {
	// Applied, when set, receives the member's applied history (see
	// internal/history): a Started record when the node opens, then what
	// its state machine applies and restores.
	Applied history.Sink
	// Transport, when set, wraps the member's raft transport; addr is the
	// member's advertised address. It sits below the node's own layers
	// (campaign gates, the reconcile seam).
	Transport func(addr string, t hraft.Transport) hraft.Transport
	// Caller, when set, wraps the member's RPC caller; addr as above. It
	// sits below the node's member-identity check.
	Caller func(addr string, c transport.Caller) transport.Caller
	// WAL are passed to wal.Open after the node's own options.
	WAL []wal.Option
	// Snapshot are passed to snapshot.Open after the node's own options.
	Snapshot []snapshot.Option
}

// Applied records the member's applied history into s.
func Applied(s history.Sink) Option { return func(o *Options) { o.Applied = s } }

// WrapTransport wraps the member's raft transport with wrap (several wrap in
// the order given, the last outermost).
func WrapTransport(wrap func(addr string, t hraft.Transport) hraft.Transport) Option {
	return func(o *Options) {
		if prev := o.Transport; prev != nil {
			o.Transport = func(addr string, t hraft.Transport) hraft.Transport { return wrap(addr, prev(addr, t)) }
			return
		}
		o.Transport = wrap
	}
}

// WrapCaller wraps the member's RPC caller with wrap (several wrap in the
// order given, the last outermost).
func WrapCaller(wrap func(addr string, c transport.Caller) transport.Caller) Option {
	return func(o *Options) {
		if prev := o.Caller; prev != nil {
			o.Caller = func(addr string, c transport.Caller) transport.Caller { return wrap(addr, prev(addr, c)) }
			return
		}
		o.Caller = wrap
	}
}

// WALOptions passes opts to the member's wal.Open, after the node's own
// (so a test may set a file system, segment size, cache size or Repair).
func WALOptions(opts ...wal.Option) Option {
	return func(o *Options) { o.WAL = append(o.WAL, opts...) }
}

// SnapshotOptions passes opts to the member's snapshot.Open, after the
// node's own (so a test may give the store the file system its log uses,
// and one power loss covers both).
func SnapshotOptions(opts ...snapshot.Option) Option {
	return func(o *Options) { o.Snapshot = append(o.Snapshot, opts...) }
}

// Collect applies opts in order.
func Collect(opts []Option) Options {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
