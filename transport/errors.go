package transport

import (
	"errors"
	"fmt"
	"net"
)

// Configuration errors, returned by Listen.
var (
	// ErrInsecureBind is returned by Listen when Config.TLS is nil, the bind
	// address is not a loopback address, and Config.AllowInsecure is false.
	ErrInsecureBind = errors.New("transport: refusing to listen without TLS on a non-loopback address (set AllowInsecure to opt out)")

	// ErrTLSConfig is returned by Listen when Config.TLS cannot provide mutual
	// TLS: no certificate, no CA pool to verify peers, or verification disabled.
	ErrTLSConfig = errors.New("transport: invalid TLS configuration")

	// ErrAdvertiseAddr is returned by Listen when the address peers should dial
	// is not a concrete host:port (for example 0.0.0.0 or an empty port).
	ErrAdvertiseAddr = errors.New("transport: advertise address is not dialable")
)

// Lifecycle errors.
var (
	// ErrClosed is returned by operations on a closed Mux. A Call that fails
	// with it before writing is also ErrNotDelivered.
	ErrClosed = errors.New("transport: mux closed")

	// ErrRaftTransportExists is returned by Mux.RaftTransport when called twice.
	ErrRaftTransportExists = errors.New("transport: raft transport already created")
)

// Call outcome classes. Every error returned by Mux.Call (and by a Caller
// wrapped by a fault injector) is exactly one of: errors.Is(err,
// ErrNotDelivered), errors.Is(err, ErrIndeterminate), or errors.As(err,
// **RemoteError).
var (
	// ErrNotDelivered means the request was never fully written to a
	// connection: the handler on the remote member certainly did not run for
	// this call. Causes: dial or TLS failure, mux closed, context done before
	// the write, request too large, write failure, injected fault. Retrying is
	// safe.
	ErrNotDelivered = errors.New("transport: request not delivered")

	// ErrIndeterminate means the request was fully written but no reply was
	// read: timeout, context canceled, connection lost, corrupt reply. The
	// handler may or may not have run, and may still be running.
	ErrIndeterminate = errors.New("transport: request outcome indeterminate")
)

// Frame decoding errors, returned by ReadFrame and DecodeRequest/Response.
// Each is also errors.Is(err, ErrBadFrame): the connection carrying it must be
// closed, because frame boundaries can no longer be trusted.
var (
	// ErrBadFrame is the class of every frame decoding error.
	ErrBadFrame = errors.New("transport: bad frame")

	// ErrFrameTooLarge: the length field exceeds the maximum frame size.
	ErrFrameTooLarge = fmt.Errorf("%w: frame too large", ErrBadFrame)

	// ErrFrameTruncated: the stream ended inside a frame.
	ErrFrameTruncated = fmt.Errorf("%w: truncated frame", ErrBadFrame)

	// ErrFrameChecksum: the CRC32C of the frame body does not match.
	ErrFrameChecksum = fmt.Errorf("%w: checksum mismatch", ErrBadFrame)

	// ErrFrameMalformed: the body does not parse (unknown type, short body,
	// bad method length, unknown status).
	ErrFrameMalformed = fmt.Errorf("%w: malformed frame", ErrBadFrame)

	// ErrBadHeader: a connection did not start with a known channel header.
	ErrBadHeader = fmt.Errorf("%w: unknown channel header", ErrBadFrame)
)

// Identity errors. Each is also errors.Is(err, ErrIdentity). A dial or call
// refused for one of them is ErrNotDelivered (nothing was sent beyond the
// TLS handshake); Listen and NewClient wrap them in ErrTLSConfig.
var (
	// ErrIdentity is the class of every identity error: with TLS, every
	// certificate names exactly one member (a URI SAN jobraft://member/<id>,
	// see MemberURI) and a peer may speak only as that member.
	ErrIdentity = errors.New("transport: member identity")

	// ErrNoIdentity: a certificate names no member, or more than one.
	ErrNoIdentity = fmt.Errorf("%w: certificate names no single member", ErrIdentity)

	// ErrWrongMember: a peer's certificate names another member than the
	// one expected (the server a member dialed), or than the one its raft
	// request claims to come from (RPCHeader.ID, or an RPCHeader.Addr whose
	// host the certificate is not valid for).
	ErrWrongMember = fmt.Errorf("%w: certificate names another member", ErrIdentity)

	// ErrUnboundTarget: with TLS, raft asked to dial an address that no
	// outbound request has named a member for, so there is nothing to
	// verify the server against: the raft transport was not wrapped by
	// Mux.BindTargets.
	ErrUnboundTarget = fmt.Errorf("%w: no member expected at the dialed address", ErrIdentity)
)

// Remote error codes set by the transport itself. A RemoteError with one of
// these codes guarantees the handler did not run.
const (
	// CodeUnknownMethod: no handler is registered for the method.
	CodeUnknownMethod = "transport.unknown_method"
	// CodeUnavailable: the remote mux is shutting down and refused the request.
	CodeUnavailable = "transport.unavailable"
)

// Remote error codes set by the transport after the handler ran.
const (
	// CodeHandlerPanic: the handler panicked; its effects are unknown.
	CodeHandlerPanic = "transport.handler_panic"
	// CodeReplyTooLarge: the handler's reply exceeded the maximum frame size
	// and was discarded; the handler ran.
	CodeReplyTooLarge = "transport.reply_too_large"
)

// RemoteError is a definite answer from the remote member: the request was
// delivered and the remote side (its handler, or the transport for the
// transport.* codes) answered with an error. A handler chooses the code by
// returning a *RemoteError (or wrapping one); any other error travels with an
// empty code and its Error() text as Message.
type RemoteError struct {
	Code    string // optional, application-defined ("" if none); at most 255 bytes
	Message string
}

func (e *RemoteError) Error() string {
	if e.Code == "" {
		return "remote: " + e.Message
	}
	return "remote: " + e.Code + ": " + e.Message
}

// HandlerRan reports whether the remote handler was invoked. It is false only
// for the transport's own refusals (CodeUnknownMethod, CodeUnavailable).
func (e *RemoteError) HandlerRan() bool {
	return e.Code != CodeUnknownMethod && e.Code != CodeUnavailable
}

// CallError is returned by Mux.Call for transport failures. It matches
// errors.Is against its Class (ErrNotDelivered or ErrIndeterminate) and
// against its cause (for example context.DeadlineExceeded, ErrClosed, or an
// injected fault).
type CallError struct {
	Class  error  // ErrNotDelivered or ErrIndeterminate
	Op     string // "dial", "handshake", "write", "wait", "read", "fault"
	Addr   string
	Method string
	Err    error // the cause
}

func (e *CallError) Error() string {
	return fmt.Sprintf("transport: call %s to %s: %s: %s (%s)", e.Method, e.Addr, e.Op, e.causeText(), classText(e.Class))
}

// ElideAddr returns err for a caller whose own message names addr already
// (a proposal forwarded to the leader names the leader, walcompare names
// the member): a *CallError to addr then reads without the address.
// errors.Is and errors.As see err unchanged.
func ElideAddr(err error, addr string) error {
	if ce, ok := err.(*CallError); ok && addr != "" && ce.Addr == addr {
		return elided{ce}
	}
	return err
}

// elided is a CallError whose text leaves out the address.
type elided struct{ ce *CallError }

func (e elided) Error() string {
	return fmt.Sprintf("transport: call %s: %s: %s (%s)", e.ce.Method, e.ce.Op, e.ce.causeText(), classText(e.ce.Class))
}

func (e elided) Unwrap() error { return e.ce }

// causeText is the cause without what the CallError says already: a
// *net.OpError for the call's own address repeats the operation and the
// address ("dial tcp A: connect: connection refused"); what it adds is its
// inner error. Errors.Is and As still see the whole cause.
func (e *CallError) causeText() string {
	if oe, ok := e.Err.(*net.OpError); ok && oe.Err != nil && oe.Addr != nil && oe.Addr.String() == e.Addr {
		return oe.Err.Error()
	}
	return fmt.Sprint(e.Err)
}

// Unwrap returns both the class and the cause.
func (e *CallError) Unwrap() []error { return []error{e.Class, e.Err} }

func classText(class error) string {
	if class == ErrNotDelivered {
		return "not delivered"
	}
	return "indeterminate"
}

func notDelivered(op, addr, method string, err error) error {
	return &CallError{Class: ErrNotDelivered, Op: op, Addr: addr, Method: method, Err: err}
}

func indeterminate(op, addr, method string, err error) error {
	return &CallError{Class: ErrIndeterminate, Op: op, Addr: addr, Method: method, Err: err}
}

// IsNotDelivered reports whether err proves the remote handler did not run for
// this call: ErrNotDelivered, or a RemoteError whose HandlerRan is false.
func IsNotDelivered(err error) bool {
	if errors.Is(err, ErrNotDelivered) {
		return true
	}
	var re *RemoteError
	return errors.As(err, &re) && !re.HandlerRan()
}
