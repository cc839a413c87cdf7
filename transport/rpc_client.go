package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Caller is the client side of the RPC layer. *Mux implements it; a
// fault injector (transport/faultnet) wraps one. The node should depend on Caller,
// not on *Mux, so chaos tests can substitute the wrapped one.
type Caller interface {
	// Call sends req to the handler registered for method on the member at
	// addr and returns its reply. The error is exactly one of three classes:
	//   - errors.Is(err, ErrNotDelivered): the handler did not run;
	//   - errors.Is(err, ErrIndeterminate): the request was written but no
	//     reply was read; the handler may have run (or still be running);
	//   - errors.As(err, **RemoteError): the remote answered with an error.
	// The returned slice is owned by the caller.
	Call(ctx context.Context, addr, method string, req []byte) ([]byte, error)
}

var _ Caller = (*Mux)(nil)

// Call implements Caller. Calls to one peer share one pooled connection
// (dialed on demand, redialed after failure) and run concurrently,
// multiplexed by request id. With TLS the server's certificate must name a
// member, and the member of ExpectPeer(ctx) when ctx carries one. If ctx has
// no deadline, Config.CallTimeout applies; the remaining time travels with the request and bounds the
// handler's context. Cancellation is honored before the write and while
// waiting for the reply; a frame being written finishes or fails within
// FrameTimeout.
func (m *Mux) Call(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	if !validMethod(method) {
		return nil, notDelivered("encode", addr, method, fmt.Errorf("invalid method name length %d", len(method)))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.cfg.CallTimeout)
		defer cancel()
	}
	m.mu.Lock()
	m.nextID++
	id := m.nextID
	m.mu.Unlock()
	deadline, _ := ctx.Deadline()
	q := request{id: id, timeout: time.Until(deadline), method: method, payload: req}
	buf := appendFrame(nil, frameRequest, q.appendBody(nil))
	if n := len(buf) - frameHeaderLen; n > m.cfg.MaxFrameSize {
		return nil, notDelivered("encode", addr, method, fmt.Errorf("%w: request %d bytes > max %d", ErrFrameTooLarge, n, m.cfg.MaxFrameSize))
	}
	want, _ := ExpectedPeer(ctx)
	// A connection found closed before our write is retried once on a fresh one.
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, notDelivered("dial", addr, method, err)
		}
		pc, op, err := m.peerConn(ctx, addr, want)
		if err != nil {
			return nil, notDelivered(op, addr, method, err)
		}
		if want != "" && m.clientTLS != nil && pc.c.peerID != want {
			err := fmt.Errorf("%w: expected member %q at %s, its certificate names %q", ErrWrongMember, clip(want), addr, clip(pc.c.peerID))
			m.refuseServer(addr, want, err)
			return nil, notDelivered("handshake", addr, method, err)
		}
		ch := make(chan response, 1)
		if err := pc.register(id, ch); err != nil {
			if attempt == 0 {
				continue
			}
			return nil, notDelivered("write", addr, method, err)
		}
		written := time.Now()
		if err := pc.write(ctx, buf); err != nil {
			pc.unregister(id)
			return nil, notDelivered("write", addr, method, err)
		}
		return pc.wait(ctx, id, ch, written, method)
	}
}

// peerSlot holds the pooled connection to one address; sem serializes dials.
type peerSlot struct {
	sem chan struct{}
	mu  sync.Mutex
	pc  *peerConn
}

func (s *peerSlot) current() *peerConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pc != nil && !s.pc.isClosed() {
		return s.pc
	}
	return nil
}

func (s *peerSlot) closeAll(err error) {
	s.mu.Lock()
	pc := s.pc
	s.mu.Unlock()
	if pc != nil {
		pc.fail(err)
	}
}

// peerConn returns the live pooled connection to addr, dialing if needed
// (expecting member want, if not ""; a pooled connection is the caller's to
// check).
func (m *Mux) peerConn(ctx context.Context, addr, want string) (*peerConn, string, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, "dial", ErrClosed
	}
	slot := m.peers[addr]
	if slot == nil {
		slot = &peerSlot{sem: make(chan struct{}, 1)}
		m.peers[addr] = slot
	}
	m.mu.Unlock()
	if pc := slot.current(); pc != nil {
		return pc, "", nil
	}
	select {
	case slot.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, "dial", ctx.Err()
	}
	defer func() { <-slot.sem }()
	if pc := slot.current(); pc != nil {
		return pc, "", nil
	}
	c, op, err := m.dial(ctx, addr, channelRPC, want)
	if err != nil {
		return nil, op, err
	}
	pc := &peerConn{m: m, addr: addr, c: c, pending: make(map[uint64]chan response), done: make(chan struct{})}
	if !m.spawn(pc.readLoop) {
		pc.fail(ErrClosed)
		return nil, "dial", ErrClosed
	}
	slot.mu.Lock()
	slot.pc = pc
	slot.mu.Unlock()
	return pc, "", nil
}

// peerConn is one multiplexed client connection.
type peerConn struct {
	m    *Mux
	addr string
	c    *trackedConn
	wmu  sync.Mutex

	mu       sync.Mutex
	pending  map[uint64]chan response
	closed   bool
	closeErr error
	done     chan struct{}

	lastRead atomic.Int64 // unix nanos of the last frame read
}

var errConnClosed = errors.New("transport: connection closed")

func (pc *peerConn) isClosed() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.closed
}

func (pc *peerConn) register(id uint64, ch chan response) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return fmt.Errorf("%w: %v", errConnClosed, pc.closeErr)
	}
	pc.pending[id] = ch
	return nil
}

func (pc *peerConn) unregister(id uint64) {
	pc.mu.Lock()
	delete(pc.pending, id)
	pc.mu.Unlock()
}

// write sends one whole frame. On error the connection is failed: frame
// boundaries are lost, so nothing else may be written to it.
func (pc *peerConn) write(ctx context.Context, buf []byte) error {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(pc.m.cfg.FrameTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pc.c.SetWriteDeadline(deadline)
	if _, err := pc.c.Write(buf); err != nil {
		pc.fail(fmt.Errorf("write: %w", err))
		return err
	}
	return nil
}

// wait waits for the reply to a written request.
func (pc *peerConn) wait(ctx context.Context, id uint64, ch chan response, written time.Time, method string) ([]byte, error) {
	select {
	case p := <-ch:
		return reply(p)
	case <-ctx.Done():
	case <-pc.done:
	}
	pc.unregister(id)
	select { // a reply that raced the cancellation still wins
	case p := <-ch:
		return reply(p)
	default:
	}
	if err := ctx.Err(); err != nil {
		// Timed out with the peer silent since our write: assume the
		// connection is dead (half-open) rather than let later calls queue
		// on it. A caller's cancellation says nothing of the peer, and
		// other calls share the connection.
		if errors.Is(err, context.DeadlineExceeded) && pc.lastRead.Load() < written.UnixNano() {
			pc.fail(fmt.Errorf("no frame from peer since a request timed out: %w", err))
		}
		return nil, indeterminate("wait", pc.addr, method, err)
	}
	pc.mu.Lock()
	err := pc.closeErr
	pc.mu.Unlock()
	return nil, indeterminate("read", pc.addr, method, err)
}

func reply(p response) ([]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.payload, nil
}

// fail closes the connection once and wakes every waiting call.
func (pc *peerConn) fail(err error) {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	pc.closed = true
	pc.closeErr = err
	pc.pending = nil
	close(pc.done)
	pc.mu.Unlock()
	_ = pc.c.Close()
}

// readLoop delivers replies to their calls until the connection fails. A bad
// frame fails the connection with a logged reason.
func (pc *peerConn) readLoop() {
	br := bufio.NewReaderSize(pc.c, 64<<10)
	for {
		_ = pc.c.SetReadDeadline(time.Time{})
		if _, err := br.Peek(1); err != nil {
			pc.fail(fmt.Errorf("%w: %v", errConnClosed, err))
			return
		}
		_ = pc.c.SetReadDeadline(time.Now().Add(pc.m.cfg.FrameTimeout))
		f, err := readFrame(br, pc.m.cfg.MaxFrameSize)
		if err == nil && f.typ != frameResponse {
			err = fmt.Errorf("%w: frame type %d", ErrFrameMalformed, f.typ)
		}
		var p response
		if err == nil {
			p, err = decodeResponse(f.body)
		}
		if err != nil {
			pc.m.log.Warn("closing rpc client connection", "peer", pc.addr, "reason", "bad reply frame", "error", err)
			pc.fail(err)
			return
		}
		pc.lastRead.Store(time.Now().UnixNano())
		pc.mu.Lock()
		ch := pc.pending[p.id]
		delete(pc.pending, p.id)
		pc.mu.Unlock()
		if ch != nil {
			ch <- p // buffered, one reply per id
		}
	}
}
