package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Handler serves one RPC method. req is owned by the handler (it may keep
// it). The returned bytes are copied into the reply before Handler's caller
// returns. A returned error reaches the caller as a *RemoteError: return (or
// wrap) a *RemoteError to choose its Code; any other error travels as its
// Error() text with an empty code. With TLS, PeerID(ctx) names the calling
// member (the one its certificate names). ctx is canceled when the caller's timeout
// elapses, the connection is lost, or the Mux closes. Handlers run
// concurrently, up to Config.MaxInflight per inbound connection.
type Handler func(ctx context.Context, req []byte) ([]byte, error)

// maxRemoteMessage bounds the error text sent back for a failed call.
const maxRemoteMessage = 16 << 10

// Handle registers h for method (1..255 bytes). Registering may happen before
// or after Listen returns; requests for a method without a handler are
// answered with a RemoteError coded CodeUnknownMethod. It panics on an invalid
// method name or a second registration of the same method (a programming
// error, as with http.ServeMux).
func (m *Mux) Handle(method string, h Handler) {
	if !validMethod(method) {
		panic(fmt.Sprintf("transport: invalid method name length %d", len(method)))
	}
	if h == nil {
		panic("transport: nil handler for " + method)
	}
	m.hmu.Lock()
	defer m.hmu.Unlock()
	if _, dup := m.handlers[method]; dup {
		panic("transport: duplicate handler for " + method)
	}
	m.handlers[method] = h
}

func (m *Mux) handler(method string) Handler {
	m.hmu.RLock()
	defer m.hmu.RUnlock()
	return m.handlers[method]
}

// serveRPC reads request frames until the connection ends or misbehaves.
// A bad frame closes this connection only, with a logged reason.
func (m *Mux) serveRPC(c *trackedConn) {
	remote := c.RemoteAddr().String()
	base := m.ctx
	if c.leaf != nil {
		base = context.WithValue(base, peerKey{}, c.peerID)
	}
	connCtx, cancel := context.WithCancel(base)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = c.Close()
		wg.Wait()
	}()
	var wmu sync.Mutex
	sem := make(chan struct{}, m.cfg.MaxInflight)
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Time{})
		if _, err := br.Peek(1); err != nil {
			if !errors.Is(err, io.EOF) && connCtx.Err() == nil {
				m.log.Debug("rpc connection ended", "remote", remote, "error", err)
			}
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(m.cfg.FrameTimeout))
		f, err := readFrame(br, m.cfg.MaxFrameSize)
		if err != nil {
			m.log.Warn("closing rpc connection", "remote", remote, "reason", "bad request frame", "error", err)
			return
		}
		if f.typ != frameRequest {
			m.log.Warn("closing rpc connection", "remote", remote, "reason", "unexpected frame type", "type", f.typ)
			return
		}
		q, err := decodeRequest(f.body)
		if err != nil {
			m.log.Warn("closing rpc connection", "remote", remote, "reason", "bad request", "error", err, "len", len(f.body))
			return
		}
		select {
		case sem <- struct{}{}:
		case <-connCtx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			p := m.runHandler(connCtx, q)
			buf := appendFrame(nil, frameResponse, p.appendBody(nil))
			if len(buf)-frameHeaderLen > m.cfg.MaxFrameSize {
				m.log.Warn("rpc reply too large", "method", q.method, "len", len(p.payload), "max", m.cfg.MaxFrameSize)
				p = response{id: q.id, err: &RemoteError{Code: CodeReplyTooLarge,
					Message: fmt.Sprintf("reply of %d bytes exceeds max frame size %d", len(p.payload), m.cfg.MaxFrameSize)}}
				buf = appendFrame(nil, frameResponse, p.appendBody(nil))
			}
			wmu.Lock()
			_ = c.SetWriteDeadline(time.Now().Add(m.cfg.FrameTimeout))
			_, err := c.Write(buf)
			wmu.Unlock()
			if err != nil {
				if connCtx.Err() == nil {
					m.log.Warn("closing rpc connection", "remote", remote, "reason", "reply write failed", "method", q.method, "error", err)
				}
				cancel()
				_ = c.Close()
			}
		}()
	}
}

// runHandler invokes the handler for q and turns its outcome into a response.
func (m *Mux) runHandler(connCtx context.Context, q request) (p response) {
	p.id = q.id
	if m.ctx.Err() != nil {
		p.err = &RemoteError{Code: CodeUnavailable, Message: "member shutting down"}
		return p
	}
	h := m.handler(q.method)
	if h == nil {
		p.err = &RemoteError{Code: CodeUnknownMethod, Message: "no handler for method " + q.method}
		return p
	}
	ctx := connCtx
	if q.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("rpc handler panicked", "method", q.method, "panic", fmt.Sprint(r))
			p = response{id: q.id, err: &RemoteError{Code: CodeHandlerPanic, Message: "handler panicked"}}
		}
	}()
	reply, err := h(ctx, q.payload)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) {
			p.err = &RemoteError{Code: re.Code, Message: re.Message}
		} else {
			p.err = &RemoteError{Message: err.Error()}
		}
		if len(p.err.Message) > maxRemoteMessage {
			p.err.Message = p.err.Message[:maxRemoteMessage]
		}
		return p
	}
	p.payload = reply
	return p
}
