package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/pkitest"
)

func TestListenRefusesInsecureNonLoopback(t *testing.T) {
	_, err := Listen(Config{BindAddr: "0.0.0.0:0"})
	if !errors.Is(err, ErrInsecureBind) {
		t.Fatalf("0.0.0.0 without TLS: want ErrInsecureBind, got %v", err)
	}
	_, err = Listen(Config{BindAddr: ":0"})
	if !errors.Is(err, ErrInsecureBind) {
		t.Fatalf(":0 without TLS: want ErrInsecureBind, got %v", err)
	}
	// Explicit opt-out: allowed, but the advertise address must be dialable.
	_, err = Listen(Config{BindAddr: "0.0.0.0:0", AllowInsecure: true})
	if !errors.Is(err, ErrAdvertiseAddr) {
		t.Fatalf("0.0.0.0 without advertise: want ErrAdvertiseAddr, got %v", err)
	}
	m, err := Listen(Config{BindAddr: "0.0.0.0:0", AllowInsecure: true, AdvertiseAddr: "127.0.0.1:7000"})
	if err != nil {
		t.Fatalf("AllowInsecure: %v", err)
	}
	_ = m.Close()
	// With TLS a non-loopback bind is fine.
	ca := pkitest.NewCA(t, "ca")
	m, err = Listen(Config{BindAddr: "0.0.0.0:0", AdvertiseAddr: "127.0.0.1:7000", TLS: ca.NodeTLS(t, "n1")})
	if err != nil {
		t.Fatalf("TLS on 0.0.0.0: %v", err)
	}
	_ = m.Close()
}

func TestListenRefusesBadTLSConfig(t *testing.T) {
	ca := pkitest.NewCA(t, "ca")
	noCert := ca.NodeTLS(t, "n1")
	noCert.Certificates = nil
	noCA := ca.NodeTLS(t, "n1")
	noCA.RootCAs, noCA.ClientCAs = nil, nil
	skip := ca.NodeTLS(t, "n1")
	skip.InsecureSkipVerify = true
	for name, cfg := range map[string]*tls.Config{"no cert": noCert, "no CA": noCA, "skip verify": skip} {
		if _, err := Listen(Config{BindAddr: "127.0.0.1:0", TLS: cfg}); !errors.Is(err, ErrTLSConfig) {
			t.Errorf("%s: want ErrTLSConfig, got %v", name, err)
		}
	}
}

// tlsCluster is a server with a valid certificate plus a raft transport.
func tlsServer(t *testing.T, ca *pkitest.CA) (*Mux, *raft.NetworkTransport, *logSink) {
	t.Helper()
	srv, logs := newTestMux(t, "srv", Config{TLS: ca.NodeTLS(t, "srv"), HandshakeTimeout: 2 * time.Second})
	srv.Handle("echo", echo)
	nt, err := srv.RaftTransport(RaftOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nt.Close() })
	// Answer every raft RPC that gets through.
	go func() {
		for rpc := range nt.Consumer() {
			rpc.Respond(&raft.RequestVoteResponse{Term: 7, Granted: true}, nil)
		}
	}()
	return srv, nt, logs
}

func requestVote(t *testing.T, m *Mux, addr string) (*raft.RequestVoteResponse, error) {
	t.Helper()
	nt, err := m.RaftTransport(RaftOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	var resp raft.RequestVoteResponse
	err = m.BindTargets(nt).RequestVote("srv", raft.ServerAddress(addr), &raft.RequestVoteRequest{RPCHeader: header(m), Term: 7}, &resp)
	return &resp, err
}

// header is the RPCHeader m's raft would send: its member and address.
func header(m *Mux) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(m.cfg.ID), Addr: []byte(m.Addr())}
}

func TestMutualTLSValidPeer(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	srv, _, _ := tlsServer(t, ca)
	cli, _ := newTestMux(t, "cli", Config{TLS: ca.NodeTLS(t, "cli")})

	got, err := cli.Call(context.Background(), srv.Addr(), "echo", []byte("tls"))
	if err != nil || string(got) != "echo:tls" {
		t.Fatalf("rpc over mTLS: %q %v", got, err)
	}
	resp, err := requestVote(t, cli, srv.Addr())
	if err != nil || !resp.Granted || resp.Term != 7 {
		t.Fatalf("raft over mTLS: %+v %v", resp, err)
	}
}

func TestMutualTLSRefusesPeerFromOtherCA(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	srv, _, logs := tlsServer(t, ca)
	rogueCA := pkitest.NewCA(t, "rogue")
	// The rogue trusts the cluster CA (so it accepts the server) but its own
	// certificate is from another CA: the server must refuse it.
	rogueTLS := rogueCA.NodeTLS(t, "rogue")
	rogueTLS.RootCAs = ca.Pool
	rogue, _ := newTestMux(t, "rogue", Config{TLS: rogueTLS, HandshakeTimeout: 2 * time.Second})

	_, err := rogue.Call(context.Background(), srv.Addr(), "echo", []byte("x"))
	if !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("rpc from other CA: want ErrNotDelivered, got %v", err)
	}
	if _, err := requestVote(t, rogue, srv.Addr()); err == nil {
		t.Fatal("raft from other CA: accepted")
	}
	waitFor(t, 5*time.Second, "logged TLS refusal", func() bool { return logs.contains("tls handshake failed") })

	// And a member of the cluster refuses a server from another CA.
	rogueSrv, _ := newTestMux(t, "rogue-srv", Config{TLS: rogueCA.NodeTLS(t, "rogue-srv")})
	rogueSrv.Handle("echo", echo)
	cli, _ := newTestMux(t, "cli", Config{TLS: ca.NodeTLS(t, "cli")})
	if _, err := cli.Call(context.Background(), rogueSrv.Addr(), "echo", nil); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("server from other CA: want ErrNotDelivered, got %v", err)
	}
}

func TestMutualTLSRefusesPeerWithoutCert(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	srv, _, logs := tlsServer(t, ca)
	for _, ch := range []byte{channelRaft, channelRPC} {
		// A TLS client trusting the cluster CA but presenting no certificate.
		c, err := tls.Dial("tcp", srv.Addr(), &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
		if err != nil {
			// TLS 1.2 would fail here already; TLS 1.3 fails at the first read.
			continue
		}
		hdr := encodeHeader(ch)
		_, _ = c.Write(hdr[:])
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var ack [headerLen]byte
		if _, err := io.ReadFull(c, ack[:]); err == nil {
			t.Fatalf("channel %d: peer without certificate got an ack", ch)
		}
		_ = c.Close()
	}
	waitFor(t, 5*time.Second, "logged TLS refusal", func() bool { return logs.contains("tls handshake failed") })

	// A plaintext peer (no TLS at all) is refused too.
	// It sends a 4-byte header where the server expects a 5-byte TLS record
	// header, so it is refused when its handshake timeout expires.
	plain, _ := newTestMux(t, "plain", Config{HandshakeTimeout: 300 * time.Millisecond})
	if _, err := plain.Call(context.Background(), srv.Addr(), "echo", nil); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("plaintext rpc: want ErrNotDelivered, got %v", err)
	}
	if _, err := requestVote(t, plain, srv.Addr()); err == nil {
		t.Fatal("plaintext raft: accepted")
	}
}

// A member must refuse a server whose certificate comes from another CA
// even when that server trusts the cluster CA (so it would accept the
// member's own certificate): only the client's verification of the server
// stands between the member and the impostor. Checked for RPC calls, the
// raft channel and the tools' Client; the impostor's handlers never run.
func TestMutualTLSClientRefusesServerFromOtherCA(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	rogueCA := pkitest.NewCA(t, "rogue")
	rogueTLS := rogueCA.NodeTLS(t, "impostor")
	rogueTLS.ClientCAs = ca.Pool // it accepts cluster members
	impostor, _ := newTestMux(t, "impostor", Config{TLS: rogueTLS, HandshakeTimeout: 2 * time.Second})
	var calls atomic.Int64
	impostor.Handle("echo", func(ctx context.Context, req []byte) ([]byte, error) {
		calls.Add(1)
		return echo(ctx, req)
	})
	nt, err := impostor.RaftTransport(RaftOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nt.Close() })
	var votes atomic.Int64
	go func() {
		for rpc := range nt.Consumer() {
			votes.Add(1)
			rpc.Respond(&raft.RequestVoteResponse{Term: 7, Granted: true}, nil)
		}
	}()

	// Control: the impostor does accept a cluster certificate from a
	// client that does not verify it (so a refusal below is the client's).
	member := ca.NodeCert(t, "member")
	raw, err := tls.Dial("tcp", impostor.Addr(), &tls.Config{Certificates: []tls.Certificate{member}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatalf("control handshake: %v", err)
	}
	hdr := encodeHeader(channelRPC)
	_, _ = raw.Write(hdr[:])
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ack [headerLen]byte
	if _, err := io.ReadFull(raw, ack[:]); err != nil || ack != hdr {
		t.Fatalf("control: the impostor refused a cluster certificate (%v): the test would prove nothing", err)
	}
	_ = raw.Close()

	cli, _ := newTestMux(t, "cli", Config{TLS: ca.NodeTLS(t, "cli"), HandshakeTimeout: 2 * time.Second})
	if _, err := cli.Call(context.Background(), impostor.Addr(), "echo", []byte("secret")); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("rpc to a server from another CA: want ErrNotDelivered, got %v", err)
	}
	var resp raft.RequestVoteResponse
	cnt, err := cli.RaftTransport(RaftOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cnt.Close()
	if err := cli.BindTargets(cnt).RequestVote("impostor", raft.ServerAddress(impostor.Addr()), &raft.RequestVoteRequest{RPCHeader: header(cli), Term: 7}, &resp); err == nil {
		t.Fatalf("raft to a server from another CA: answered %+v", resp)
	}
	tool, err := NewClient(ClientConfig{TLS: ca.NodeTLS(t, "tool"), HandshakeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	if _, err := tool.Call(context.Background(), impostor.Addr(), "echo", nil); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("tool client to a server from another CA: want ErrNotDelivered, got %v", err)
	}
	if n, v := calls.Load(), votes.Load(); n != 0 || v != 0 {
		t.Fatalf("the impostor served %d calls and %d raft requests", n, v)
	}
}
