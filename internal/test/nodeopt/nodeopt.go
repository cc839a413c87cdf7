// Package nodeopt builds the options of raft.Open and jobraft.Open
// (raft.Option) that this module's tests pass: instrumentation and fault
// seams, kept out of the public Config types. A host passes none.
//
// The seams are narrow hooks, not fault types: a test wraps the member's raft
// transport and RPC caller (with transport/faultnet) or gives the log a file
// system (wal/faultfs) through them, so neither injector is linked into a
// host binary.
package nodeopt

import (
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// Option sets one option: a raft.Option.
type Option = raft.Option

// Applied records the member's applied history into s (see
// internal/test/history): a Started record when the node opens, then what its
// state machine applies and restores.
func Applied(s history.Sink) Option {
	return func(w *raft.Wiring) { w.Applied = &recorder{sink: s} }
}

// recorder is a raft.AppliedObserver over a history sink.
type recorder struct {
	sink history.Sink
	buf  []history.Record // reused on the state machine's goroutine
}

var _ raft.AppliedObserver = (*recorder)(nil)

// Started implements raft.AppliedObserver.
func (r *recorder) Started() { r.sink.Append([]history.Record{{Kind: history.KindStarted}}) }

// Applied implements raft.AppliedObserver: one Applied record per entry of
// the batch, with the CRC32C of the entry's Data — its payload stamp.
func (r *recorder) Applied(logs []*hraft.Log) {
	r.buf = r.buf[:0]
	for _, l := range logs {
		r.buf = append(r.buf, history.Record{Kind: history.KindApplied, Index: l.Index, Term: l.Term, Type: l.Type, CRC: segment.Checksum(l.Data)})
	}
	r.sink.Append(r.buf)
}

// Restored implements raft.AppliedObserver.
func (r *recorder) Restored(index uint64) {
	r.sink.Append([]history.Record{{Kind: history.KindRestored, Index: index}})
}

// WrapTransport wraps the member's raft transport with wrap (several wrap in
// the order given, the last outermost).
func WrapTransport(wrap func(addr string, t hraft.Transport) hraft.Transport) Option {
	return func(w *raft.Wiring) {
		if prev := w.Transport; prev != nil {
			w.Transport = func(addr string, t hraft.Transport) hraft.Transport { return wrap(addr, prev(addr, t)) }
			return
		}
		w.Transport = wrap
	}
}

// WrapCaller wraps the member's RPC caller with wrap (several wrap in the
// order given, the last outermost).
func WrapCaller(wrap func(addr string, c transport.Caller) transport.Caller) Option {
	return func(w *raft.Wiring) {
		if prev := w.Caller; prev != nil {
			w.Caller = func(addr string, c transport.Caller) transport.Caller { return wrap(addr, prev(addr, c)) }
			return
		}
		w.Caller = wrap
	}
}

// WALOptions passes opts to the member's wal.Open, after the node's own
// (so a test may set a file system, segment size, cache size or Repair).
func WALOptions(opts ...wal.Option) Option {
	return func(w *raft.Wiring) { w.WAL = append(w.WAL, opts...) }
}

// SnapshotOptions passes opts to the member's snapshot.Open, after the
// node's own (so a test may give the store the file system its log uses,
// and one power loss covers both).
func SnapshotOptions(opts ...snapshot.Option) Option {
	return func(w *raft.Wiring) { w.Snapshot = append(w.Snapshot, opts...) }
}
