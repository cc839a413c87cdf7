package transport

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	q := request{id: 42, timeout: 1500 * time.Millisecond, method: "raft.forward", payload: []byte("cmd")}
	buf := appendFrame(nil, frameRequest, q.appendBody(nil))
	f, err := readFrame(bytes.NewReader(buf), 1<<10)
	if err != nil || f.typ != frameRequest {
		t.Fatalf("readFrame: %v %v", f.typ, err)
	}
	got, err := decodeRequest(f.body)
	if err != nil || got.id != q.id || got.timeout != q.timeout || got.method != q.method || !bytes.Equal(got.payload, q.payload) {
		t.Fatalf("request round trip: %+v %v", got, err)
	}

	for _, p := range []response{
		{id: 7, payload: []byte("reply")},
		{id: 8, err: &RemoteError{Code: "not_leader", Message: "try n2"}},
		{id: 9, err: &RemoteError{Message: "no code"}},
	} {
		buf := appendFrame(nil, frameResponse, p.appendBody(nil))
		f, err := readFrame(bytes.NewReader(buf), 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeResponse(f.body)
		if err != nil || got.id != p.id || !bytes.Equal(got.payload, p.payload) ||
			(p.err == nil) != (got.err == nil) || (p.err != nil && *p.err != *got.err) {
			t.Fatalf("response round trip: %+v -> %+v %v", p, got, err)
		}
	}
}

func TestReadFrameErrors(t *testing.T) {
	good := appendFrame(nil, frameRequest, (&request{id: 1, method: "m", payload: []byte("abc")}).appendBody(nil))
	flip := bytes.Clone(good)
	flip[10] ^= 1
	zero := []byte{0, 0, 0, 0, 0, 0, 0, 0}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"short header", good[:5], ErrFrameTruncated},
		{"short body", good[:len(good)-1], ErrFrameTruncated},
		{"checksum", flip, ErrFrameChecksum},
		{"zero length", zero, ErrFrameMalformed},
		{"too large", huge, ErrFrameTooLarge},
	}
	for _, tc := range cases {
		_, err := readFrame(bytes.NewReader(tc.in), 1<<10)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if tc.want != io.EOF && !errors.Is(err, ErrBadFrame) {
			t.Errorf("%s: %v is not ErrBadFrame", tc.name, err)
		}
	}
}

func TestHeader(t *testing.T) {
	for _, ch := range []byte{channelRaft, channelRPC} {
		if got, err := decodeHeader(encodeHeader(ch)); err != nil || got != ch {
			t.Fatalf("header %d: %d %v", ch, got, err)
		}
	}
	for _, h := range [][headerLen]byte{{'J', 'R', 1, 0}, {'J', 'R', 2, 1}, {'X', 'R', 1, 1}, {0, 0, 0, 0}} {
		if _, err := decodeHeader(h); !errors.Is(err, ErrBadHeader) {
			t.Errorf("header %v: %v", h, err)
		}
	}
}

// FuzzReadFrame: any byte stream yields frames or a clean typed error, never a
// panic, and never a frame larger than the maximum.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrame(nil, frameRequest, (&request{id: 1, method: "m", payload: []byte("x")}).appendBody(nil)))
	f.Add(appendFrame(nil, frameResponse, (&response{id: 2, err: &RemoteError{Code: "c", Message: "m"}}).appendBody(nil)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 4096
		r := bytes.NewReader(data)
		for {
			fr, err := readFrame(r, max)
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrBadFrame) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if len(fr.body)+1 > max {
				t.Fatalf("frame of %d bytes exceeds max", len(fr.body)+1)
			}
			switch fr.typ {
			case frameRequest:
				if q, err := decodeRequest(fr.body); err == nil {
					if !validMethod(q.method) {
						t.Fatalf("accepted invalid method %q", q.method)
					}
					re := appendFrame(nil, frameRequest, q.appendBody(nil))
					if !bytes.Equal(re[frameHeaderLen:], append([]byte{frameRequest}, fr.body...)) && q.timeout%time.Millisecond == 0 {
						t.Fatalf("request re-encoding differs")
					}
				} else if !errors.Is(err, ErrFrameMalformed) {
					t.Fatalf("untyped request error %v", err)
				}
			case frameResponse:
				if _, err := decodeResponse(fr.body); err != nil && !errors.Is(err, ErrFrameMalformed) {
					t.Fatalf("untyped response error %v", err)
				}
			}
		}
	})
}

// FuzzDecodeBodies exercises the body decoders directly.
func FuzzDecodeBodies(f *testing.F) {
	f.Add((&request{id: 1, method: "m", payload: []byte("x")}).appendBody(nil))
	f.Add((&response{id: 2, err: &RemoteError{Code: "c", Message: "m"}}).appendBody(nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := decodeRequest(body); err != nil && !errors.Is(err, ErrFrameMalformed) {
			t.Fatalf("request: %v", err)
		}
		if _, err := decodeResponse(body); err != nil && !errors.Is(err, ErrFrameMalformed) {
			t.Fatalf("response: %v", err)
		}
	})
}
