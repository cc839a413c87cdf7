package transport

import (
	"bufio"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// raftGate is an inbound raft connection under TLS as hashicorp/raft's
// NetworkTransport reads it. raft decodes requests off the connection and
// dispatches them itself, so the check has to sit in the byte stream: the
// gate reads each request whole — its type byte and its msgpack body, with
// the same codec raft uses — checks the body's RPCHeader against the peer's
// certificate (checkClaim), and only then lets raft read those bytes. The
// data of a snapshot install (InstallSnapshotRequest.Size bytes after the
// request) follows unchecked. A refused request is counted, logged (type,
// claimed member and address, certificate's member; never payload bytes)
// and closes the connection: raft reads an error, drops the connection, and
// the sender's request fails. raft's requests on one connection are read
// by one goroutine, so the gate needs no lock.
type raftGate struct {
	*trackedConn
	rec     recorder
	dec     *codec.Decoder
	pending []byte // a checked request not yet read by raft
	raw     int64  // snapshot bytes still to pass through
	err     error  // sticky: the connection is refused
}

// The request types of hashicorp/raft v1.7.3's wire protocol (the first
// byte of each request; net_transport.go).
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

// wireHeader is what the gate decodes of a request: the embedded RPCHeader
// (msgpack inlines it as raft's requests do) and, for a snapshot install,
// the size of the data that follows. Other fields are skipped.
type wireHeader struct {
	raft.RPCHeader
	Size int64
}

func newRaftGate(m *Mux, c *trackedConn) *raftGate {
	g := &raftGate{trackedConn: c, rec: recorder{r: bufio.NewReaderSize(c.Conn, 64<<10)}}
	g.dec = codec.NewDecoder(&g.rec, &codec.MsgpackHandle{})
	return g
}

// Read implements net.Conn for raft: checked request bytes, then snapshot
// data, then the next request once it is checked.
func (g *raftGate) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(g.pending) == 0 && g.raw == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if err := g.next(); err != nil {
			g.err = err
			return 0, err
		}
	}
	if len(g.pending) > 0 {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	n, err := g.rec.r.Read(p[:min(int64(len(p)), g.raw)])
	g.raw -= int64(n)
	return n, err
}

// next reads and checks one request.
func (g *raftGate) next() error {
	if cap(g.rec.buf) > 1<<20 {
		g.rec.buf = nil // do not keep a large request's buffer for ever
	}
	g.rec.buf = g.rec.buf[:0]
	typ, err := g.rec.ReadByte()
	if err != nil {
		return err // io.EOF between requests: the peer closed
	}
	if typ > rpcRequestPreVote {
		return g.refuse(typ, nil, fmt.Errorf("%w: unknown raft request type %d", ErrBadHeader, typ))
	}
	var h wireHeader
	if err := g.dec.Decode(&h); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return g.refuse(typ, nil, fmt.Errorf("decode raft request: %w", err))
	}
	if err := checkClaim(h.RPCHeader, g.peerID, g.leaf, g.m.clientTLS.ServerName); err != nil {
		g.m.idIn.Add(1)
		return g.refuse(typ, &h.RPCHeader, err)
	}
	if typ == rpcInstallSnapshot {
		if h.Size < 0 {
			return g.refuse(typ, &h.RPCHeader, fmt.Errorf("snapshot size %d", h.Size))
		}
		g.raw = h.Size
	}
	g.pending = g.rec.buf
	return nil
}

// refuse logs why the connection is closed and closes it.
func (g *raftGate) refuse(typ uint8, h *raft.RPCHeader, err error) error {
	kv := []any{"remote", g.RemoteAddr().String(), "peer_member", g.peerID, "rpc_type", typ, "len", len(g.rec.buf), "error", err}
	if h != nil {
		kv = append(kv, "claimed_id", clip(string(h.ID)), "claimed_addr", clip(string(h.Addr)))
	}
	g.m.log.Warn("refusing raft request", kv...)
	_ = g.trackedConn.Close()
	return err
}

// recorder is the gate's view of the wire for the decoder: it keeps every
// byte the decoder consumes. The decoder reads no further than the value it
// decodes when its reader is an io.ByteScanner (raft relies on the same).
type recorder struct {
	r   *bufio.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

func (r *recorder) ReadByte() (byte, error) {
	b, err := r.r.ReadByte()
	if err == nil {
		r.buf = append(r.buf, b)
	}
	return b, err
}

func (r *recorder) UnreadByte() error {
	if err := r.r.UnreadByte(); err != nil {
		return err
	}
	r.buf = r.buf[:len(r.buf)-1]
	return nil
}
