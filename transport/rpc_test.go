package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

func echo(_ context.Context, req []byte) ([]byte, error) { return append([]byte("echo:"), req...), nil }

func TestCallRoundTrip(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{})
	cli, _ := newTestMux(t, "cli", Config{})
	srv.Handle("echo", echo)

	ctx := context.Background()
	got, err := cli.Call(ctx, srv.Addr(), "echo", []byte("hi"))
	if err != nil || string(got) != "echo:hi" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	// Empty request and reply.
	srv.Handle("empty", func(context.Context, []byte) ([]byte, error) { return nil, nil })
	if got, err := cli.Call(ctx, srv.Addr(), "empty", nil); err != nil || len(got) != 0 {
		t.Fatalf("empty Call = %q, %v", got, err)
	}
}

func TestCallConcurrentMultiplexed(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{})
	cli, _ := newTestMux(t, "cli", Config{})
	release := make(chan struct{})
	srv.Handle("slow", func(_ context.Context, req []byte) ([]byte, error) {
		if req[0] == 0 {
			<-release // the first call blocks until all others answered
		}
		return req, nil
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if got, err := cli.Call(ctx, srv.Addr(), "slow", []byte{0}); err != nil || got[0] != 0 {
			errs <- fmt.Errorf("blocked call: %v %v", got, err)
		}
	}()
	var others sync.WaitGroup
	for i := 1; i < 64; i++ {
		others.Add(1)
		go func() {
			defer others.Done()
			got, err := cli.Call(ctx, srv.Addr(), "slow", []byte{byte(i)})
			if err != nil || len(got) != 1 || got[0] != byte(i) {
				errs <- fmt.Errorf("call %d: %v %v", i, got, err)
			}
		}()
	}
	others.Wait() // answered while call 0 is still blocked: no head-of-line blocking
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCallRemoteError(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{})
	cli, _ := newTestMux(t, "cli", Config{})
	srv.Handle("coded", func(context.Context, []byte) ([]byte, error) {
		return nil, fmt.Errorf("wrapped: %w", &RemoteError{Code: "not_leader", Message: "leader is n2"})
	})
	srv.Handle("plain", func(context.Context, []byte) ([]byte, error) { return nil, errors.New("boom") })
	srv.Handle("panics", func(context.Context, []byte) ([]byte, error) { panic("oops") })

	cases := []struct {
		method, code, msg string
		handlerRan        bool
	}{
		{"coded", "not_leader", "leader is n2", true},
		{"plain", "", "boom", true},
		{"panics", CodeHandlerPanic, "handler panicked", true},
		{"nosuch", CodeUnknownMethod, "no handler for method nosuch", false},
	}
	for _, tc := range cases {
		_, err := cli.Call(context.Background(), srv.Addr(), tc.method, []byte("x"))
		var re *RemoteError
		if !errors.As(err, &re) {
			t.Fatalf("%s: want *RemoteError, got %v", tc.method, err)
		}
		if re.Code != tc.code || re.Message != tc.msg || re.HandlerRan() != tc.handlerRan {
			t.Errorf("%s: got %+v ran=%v", tc.method, re, re.HandlerRan())
		}
		if errors.Is(err, ErrNotDelivered) || errors.Is(err, ErrIndeterminate) {
			t.Errorf("%s: remote error must not be a transport class: %v", tc.method, err)
		}
		if IsNotDelivered(err) == tc.handlerRan {
			t.Errorf("%s: IsNotDelivered = %v", tc.method, IsNotDelivered(err))
		}
	}
	// The connection survives remote errors.
	srv.Handle("echo", echo)
	if _, err := cli.Call(context.Background(), srv.Addr(), "echo", nil); err != nil {
		t.Fatal(err)
	}
}

func TestCallNotDelivered(t *testing.T) {
	cli, _ := newTestMux(t, "cli", Config{MaxFrameSize: 1024})
	// A port with no listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()

	_, err = cli.Call(context.Background(), dead, "echo", nil)
	if !errors.Is(err, ErrNotDelivered) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("dial failure: want ErrNotDelivered, got %v", err)
	}

	srv, _ := newTestMux(t, "srv", Config{})
	srv.Handle("echo", echo)
	_, err = cli.Call(context.Background(), srv.Addr(), "echo", make([]byte, 2048))
	if !errors.Is(err, ErrNotDelivered) || !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized request: want ErrNotDelivered+ErrFrameTooLarge, got %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = cli.Call(ctx, srv.Addr(), "echo", nil)
	if !errors.Is(err, ErrNotDelivered) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled before send: want ErrNotDelivered+Canceled, got %v", err)
	}

	_ = cli.Close()
	_, err = cli.Call(context.Background(), srv.Addr(), "echo", nil)
	if !errors.Is(err, ErrNotDelivered) || !errors.Is(err, ErrClosed) {
		t.Fatalf("closed mux: want ErrNotDelivered+ErrClosed, got %v", err)
	}
}

func TestCallIndeterminate(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{})
	cli, _ := newTestMux(t, "cli", Config{})
	ran := make(chan struct{}, 4)
	release := make(chan struct{})
	srv.Handle("hang", func(ctx context.Context, _ []byte) ([]byte, error) {
		ran <- struct{}{}
		<-release
		return nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := cli.Call(ctx, srv.Addr(), "hang", nil)
	if !errors.Is(err, ErrIndeterminate) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout after send: want ErrIndeterminate+DeadlineExceeded, got %v", err)
	}
	select {
	case <-ran:
	default:
		t.Fatal("handler did not run")
	}
	close(release)

	// Connection lost after the request was written: the server mux closes.
	srv2, _ := newTestMux(t, "srv2", Config{})
	srv2.Handle("hang", func(ctx context.Context, _ []byte) ([]byte, error) {
		ran <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	errc := make(chan error, 1)
	go func() {
		_, err := cli.Call(context.Background(), srv2.Addr(), "hang", nil)
		errc <- err
	}()
	<-ran
	_ = srv2.Close()
	err = <-errc
	if !errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotDelivered) {
		t.Fatalf("connection lost: want ErrIndeterminate, got %v", err)
	}
}

func TestReplyTooLarge(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{MaxFrameSize: 1024})
	cli, _ := newTestMux(t, "cli", Config{MaxFrameSize: 1024})
	srv.Handle("big", func(context.Context, []byte) ([]byte, error) { return make([]byte, 4096), nil })
	_, err := cli.Call(context.Background(), srv.Addr(), "big", nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeReplyTooLarge {
		t.Fatalf("want RemoteError %s, got %v", CodeReplyTooLarge, err)
	}
}

// rawRPCConn dials srv's RPC channel by hand (no TLS) and returns the conn
// after the channel ack.
func rawRPCConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	hdr := encodeHeader(channelRPC)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	var ack [headerLen]byte
	if _, err := c.Read(ack[:]); err != nil || ack != hdr {
		t.Fatalf("ack %v %v", ack, err)
	}
	return c
}

// expectClosedByPeer reads until the server closes c.
func expectClosedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("server did not close the connection")
			}
			return
		}
	}
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	srv, logs := newTestMux(t, "srv", Config{MaxFrameSize: 1024, FrameTimeout: 300 * time.Millisecond})
	srv.Handle("echo", echo)
	cli, _ := newTestMux(t, "cli", Config{})
	good := func() {
		t.Helper()
		if got, err := cli.Call(context.Background(), srv.Addr(), "echo", []byte("ok")); err != nil || string(got) != "echo:ok" {
			t.Fatalf("member stopped serving: %q %v", got, err)
		}
	}
	good()

	okReq := appendFrame(nil, frameRequest, (&request{id: 1, method: "echo", payload: []byte("p")}).appendBody(nil))
	corrupt := bytes.Clone(okReq)
	corrupt[len(corrupt)-1] ^= 0xff
	oversized := appendFrame(nil, frameRequest, (&request{id: 1, method: "echo", payload: make([]byte, 2048)}).appendBody(nil))
	badMethod := appendFrame(nil, frameRequest, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 200, 'x'})
	wrongType := appendFrame(nil, frameResponse, (&response{id: 1}).appendBody(nil))

	cases := []struct {
		name, reason string
		input        []byte
		raw          bool // skip the channel header
	}{
		{"garbage header", "bad channel header", []byte("GET / HTTP/1.1\r\n\r\n"), true},
		{"unknown channel", "bad channel header", []byte{'J', 'R', 1, 9}, true},
		{"checksum", "bad request frame", corrupt, false},
		{"oversized", "bad request frame", oversized[:64], false},
		{"bad method length", "bad request", badMethod, false},
		{"wrong frame type", "unexpected frame type", wrongType, false},
		{"truncated", "bad request frame", okReq[:len(okReq)-2], false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c net.Conn
			if tc.raw {
				var err error
				if c, err = net.Dial("tcp", srv.Addr()); err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			} else {
				c = rawRPCConn(t, srv.Addr())
			}
			if _, err := c.Write(tc.input); err != nil {
				t.Fatal(err)
			}
			expectClosedByPeer(t, c)
			if !logs.contains(tc.reason) {
				t.Errorf("no logged reason %q", tc.reason)
			}
			good()
		})
	}
}

// A call its caller canceled says nothing of the peer: the connection and
// the calls sharing it live on. (A call that timed out with the peer
// silent since its write still fails the connection as half-open.)
// Before, any ended context failed the connection, and every call in
// flight on it ended indeterminate: jobd's member list saw a live member
// "down" after another request's status call was canceled.
func TestCanceledCallLeavesTheConnectionToOthers(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{})
	cli, _ := newTestMux(t, "cli", Config{})
	ran := make(chan byte, 2)
	release := make(chan struct{})
	srv.Handle("slow", func(_ context.Context, req []byte) ([]byte, error) {
		ran <- req[0]
		<-release
		return req, nil
	})
	kept := make(chan error, 1)
	go func() {
		got, err := cli.Call(context.Background(), srv.Addr(), "slow", []byte{1})
		if err == nil && (len(got) != 1 || got[0] != 1) {
			err = fmt.Errorf("reply %v", got)
		}
		kept <- err
	}()
	<-ran
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctx, srv.Addr(), "slow", []byte{2})
		canceled <- err
	}()
	<-ran // both written, the peer silent since
	cancel()
	if err := <-canceled; !errors.Is(err, ErrIndeterminate) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled call: %v, want indeterminate, canceled", err)
	}
	close(release)
	if err := <-kept; err != nil {
		t.Fatalf("the call sharing the connection: %v, want its answer", err)
	}
}
