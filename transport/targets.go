package transport

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Outbound raft identity: which member the server at a dialed address must be.
//
// hashicorp/raft names the member of every request it sends (id and target
// address, from its configuration), but its NetworkTransport dials and pools
// connections by address only. BindTargets records, before each request,
// that target belongs to id; the raft channel's Dial verifies the server's
// certificate names the member recorded for the address it dials, and a
// pooled connection verified for one member refuses to carry a request once
// the address is recorded for another (it fails the write; raft drops the
// connection and dials again). An address belongs to one member at a time.

// targetBook maps an address to the member raft last sent to there.
type targetBook struct {
	mu  sync.RWMutex
	ids map[string]string
}

func (b *targetBook) bind(addr, id string) {
	b.mu.RLock()
	same := b.ids[addr] == id
	b.mu.RUnlock()
	if same {
		return
	}
	b.mu.Lock()
	if b.ids == nil {
		b.ids = make(map[string]string)
	}
	b.ids[addr] = id
	b.mu.Unlock()
}

func (b *targetBook) lookup(addr string) string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.ids[addr]
}

// boundConn is an outbound raft connection whose server was verified to be
// member id at addr.
type boundConn struct {
	*trackedConn
	addr, id string
}

// Write refuses to send a request once addr is recorded for another member.
func (c *boundConn) Write(p []byte) (int, error) {
	if now := c.m.targets.lookup(c.addr); now != c.id {
		err := fmt.Errorf("%w: connection to %s verified for member %q, now expected %q", ErrWrongMember, c.addr, clip(c.id), clip(now))
		c.m.refuseServer(c.addr, now, err)
		return 0, err
	}
	return c.trackedConn.Write(p)
}

// BindTargets wraps t, a raft transport built on this Mux by RaftTransport
// (possibly wrapped itself), so that every outbound request first records
// the member raft names for its target address; with TLS the raft channel
// then dials only servers whose certificate names that member, and refuses
// to dial an address no request named (ErrUnboundTarget). Hand the result
// (or a wrapper of it) to raft.NewRaft. It keeps raft.WithPreVote when t
// has it, and raft.WithClose.
func (m *Mux) BindTargets(t raft.Transport) raft.Transport {
	b := &binder{inner: t, book: &m.targets}
	if _, ok := t.(raft.WithPreVote); ok {
		return binderPreVote{b}
	}
	return b
}

type binder struct {
	inner raft.Transport
	book  *targetBook
}

type binderPreVote struct{ *binder }

var (
	_ raft.Transport   = (*binder)(nil)
	_ raft.WithClose   = (*binder)(nil)
	_ raft.WithPreVote = binderPreVote{}
)

func (b *binder) bind(id raft.ServerID, target raft.ServerAddress) {
	b.book.bind(string(target), string(id))
}

// Consumer implements raft.Transport.
func (b *binder) Consumer() <-chan raft.RPC { return b.inner.Consumer() }

// LocalAddr implements raft.Transport.
func (b *binder) LocalAddr() raft.ServerAddress { return b.inner.LocalAddr() }

// AppendEntriesPipeline implements raft.Transport.
func (b *binder) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	b.bind(id, target)
	return b.inner.AppendEntriesPipeline(id, target)
}

// AppendEntries implements raft.Transport.
func (b *binder) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	b.bind(id, target)
	return b.inner.AppendEntries(id, target, args, resp)
}

// RequestVote implements raft.Transport.
func (b *binder) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	b.bind(id, target)
	return b.inner.RequestVote(id, target, args, resp)
}

// InstallSnapshot implements raft.Transport.
func (b *binder) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	b.bind(id, target)
	return b.inner.InstallSnapshot(id, target, args, resp, data)
}

// EncodePeer implements raft.Transport.
func (b *binder) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return b.inner.EncodePeer(id, addr)
}

// DecodePeer implements raft.Transport.
func (b *binder) DecodePeer(p []byte) raft.ServerAddress { return b.inner.DecodePeer(p) }

// SetHeartbeatHandler implements raft.Transport.
func (b *binder) SetHeartbeatHandler(cb func(rpc raft.RPC)) { b.inner.SetHeartbeatHandler(cb) }

// TimeoutNow implements raft.Transport.
func (b *binder) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	b.bind(id, target)
	return b.inner.TimeoutNow(id, target, args, resp)
}

// Close implements raft.WithClose: it closes the inner transport when it
// can be closed.
func (b *binder) Close() error {
	if c, ok := b.inner.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// RequestPreVote implements raft.WithPreVote.
func (b binderPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	b.bind(id, target)
	return b.inner.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}
