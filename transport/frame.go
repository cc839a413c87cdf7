package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// Channel header, written once by the dialer right after the (optional) TLS
// handshake, before any other byte:
//
//	  0     1     2        3
//	+-----+-----+--------+---------+
//	| 'J' | 'R' | version| channel |
//	+-----+-----+--------+---------+
//
// version is headerVersion (1); channel is channelRaft (1) or channelRPC (2).
// Anything else closes the connection with a logged reason.
const (
	headerLen     = 4
	headerVersion = 1

	channelRaft byte = 1
	channelRPC  byte = 2
)

func encodeHeader(channel byte) [headerLen]byte {
	return [headerLen]byte{'J', 'R', headerVersion, channel}
}

// decodeHeader validates a channel header and returns its channel.
func decodeHeader(h [headerLen]byte) (byte, error) {
	if h[0] != 'J' || h[1] != 'R' {
		return 0, fmt.Errorf("%w: bad magic", ErrBadHeader)
	}
	if h[2] != headerVersion {
		return 0, fmt.Errorf("%w: version %d", ErrBadHeader, h[2])
	}
	if h[3] != channelRaft && h[3] != channelRPC {
		return 0, fmt.Errorf("%w: channel %d", ErrBadHeader, h[3])
	}
	return h[3], nil
}

// RPC frame, all integers big-endian:
//
//	  0          4          8       9
//	+----------+----------+-------+------------------------+
//	| len u32  | crc u32  | type  | body (len-1 bytes)     |
//	+----------+----------+-------+------------------------+
//
// len counts the bytes after the crc field (type + body): 1 <= len <= max
// frame size. crc is CRC32C (Castagnoli) over those len bytes. The length is
// checked against the maximum before anything is allocated.
//
// Request body (type 1):
//
//	+--------+----------------+---------+--------------+-----------------+
//	| id u64 | timeout_ms u32 | mlen u8 | method[mlen] | payload (rest)  |
//	+--------+----------------+---------+--------------+-----------------+
//
// timeout_ms is the caller's remaining time (0 = none); 1 <= mlen.
//
// Response body (type 2):
//
//	+--------+-----------+----------------------------------------------+
//	| id u64 | status u8 | status 0: payload (rest)                     |
//	|        |           | status 1: clen u8 | code[clen] | msg (rest)  |
//	+--------+-----------+----------------------------------------------+
const (
	frameHeaderLen = 8

	frameRequest  byte = 1
	frameResponse byte = 2

	statusOK    byte = 0
	statusError byte = 1

	requestFixedLen  = 8 + 4 + 1 // id, timeout, mlen
	responseFixedLen = 8 + 1     // id, status
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frame is one decoded, checksum-verified frame.
type frame struct {
	typ  byte
	body []byte
}

// appendFrame appends the framed encoding of (typ, body) to dst.
func appendFrame(dst []byte, typ byte, body []byte) []byte {
	n := 1 + len(body)
	crc := crc32.Update(crc32.Update(0, castagnoli, []byte{typ}), castagnoli, body)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, crc)
	dst = append(dst, typ)
	return append(dst, body...)
}

// readFrame reads one frame from r. It never allocates more than maxSize+1
// bytes. Errors: io.EOF (clean end before a frame), ErrFrameTruncated,
// ErrFrameTooLarge, ErrFrameChecksum, ErrFrameMalformed, or the reader's own
// error (for example a deadline) wrapped.
func readFrame(r io.Reader, maxSize int) (frame, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, truncation(err, true)
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n == 0 {
		return frame{}, fmt.Errorf("%w: zero length", ErrFrameMalformed)
	}
	if uint64(n) > uint64(maxSize) {
		return frame{}, fmt.Errorf("%w: %d bytes > max %d", ErrFrameTooLarge, n, maxSize)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return frame{}, truncation(err, false)
	}
	if got, want := crc32.Checksum(buf, castagnoli), binary.BigEndian.Uint32(hdr[4:8]); got != want {
		return frame{}, fmt.Errorf("%w: len %d crc %08x want %08x", ErrFrameChecksum, n, got, want)
	}
	return frame{typ: buf[0], body: buf[1:]}, nil
}

// truncation maps short reads: a clean EOF before the first byte stays io.EOF
// (atStart), any other end of stream is ErrFrameTruncated; other errors
// (deadlines, resets) are returned wrapped.
func truncation(err error, atStart bool) error {
	switch {
	case atStart && errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		return io.EOF
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrFrameTruncated
	default:
		return fmt.Errorf("transport: read frame: %w", err)
	}
}

// request is an RPC request frame body.
type request struct {
	id      uint64
	timeout time.Duration // 0 = none; millisecond resolution on the wire
	method  string
	payload []byte
}

func (q *request) appendBody(dst []byte) []byte {
	ms := q.timeout.Milliseconds()
	if q.timeout > 0 && ms == 0 {
		ms = 1
	}
	if ms > int64(^uint32(0)) {
		ms = int64(^uint32(0))
	}
	dst = binary.BigEndian.AppendUint64(dst, q.id)
	dst = binary.BigEndian.AppendUint32(dst, uint32(ms))
	dst = append(dst, byte(len(q.method)))
	dst = append(dst, q.method...)
	return append(dst, q.payload...)
}

// validMethod reports whether m can travel in a request (1..255 bytes).
func validMethod(m string) bool { return len(m) >= 1 && len(m) <= 255 }

// decodeRequest parses a request body. The payload aliases body.
func decodeRequest(body []byte) (request, error) {
	if len(body) < requestFixedLen {
		return request{}, fmt.Errorf("%w: request body %d bytes", ErrFrameMalformed, len(body))
	}
	q := request{
		id:      binary.BigEndian.Uint64(body[0:8]),
		timeout: time.Duration(binary.BigEndian.Uint32(body[8:12])) * time.Millisecond,
	}
	mlen := int(body[12])
	rest := body[requestFixedLen:]
	if mlen == 0 || mlen > len(rest) {
		return request{}, fmt.Errorf("%w: method length %d of %d", ErrFrameMalformed, mlen, len(rest))
	}
	q.method = string(rest[:mlen])
	q.payload = rest[mlen:]
	return q, nil
}

// response is an RPC response frame body; err is nil for success.
type response struct {
	id      uint64
	err     *RemoteError
	payload []byte
}

func (p *response) appendBody(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, p.id)
	if p.err == nil {
		dst = append(dst, statusOK)
		return append(dst, p.payload...)
	}
	code := p.err.Code
	if len(code) > 255 {
		code = code[:255]
	}
	dst = append(dst, statusError, byte(len(code)))
	dst = append(dst, code...)
	return append(dst, p.err.Message...)
}

// decodeResponse parses a response body. The payload aliases body.
func decodeResponse(body []byte) (response, error) {
	if len(body) < responseFixedLen {
		return response{}, fmt.Errorf("%w: response body %d bytes", ErrFrameMalformed, len(body))
	}
	p := response{id: binary.BigEndian.Uint64(body[0:8])}
	rest := body[responseFixedLen:]
	switch body[8] {
	case statusOK:
		p.payload = rest
	case statusError:
		if len(rest) < 1 || int(rest[0]) > len(rest)-1 {
			return response{}, fmt.Errorf("%w: error code length", ErrFrameMalformed)
		}
		clen := int(rest[0])
		p.err = &RemoteError{Code: string(rest[1 : 1+clen]), Message: string(rest[1+clen:])}
	default:
		return response{}, fmt.Errorf("%w: status %d", ErrFrameMalformed, body[8])
	}
	return p, nil
}
