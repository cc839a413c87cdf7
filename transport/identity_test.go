package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/pkitest"
)

func TestCertIdentity(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	odd := "a b/c%d"
	for _, tc := range []struct {
		name string
		uris []*url.URL
		want string // "" = ErrNoIdentity
	}{
		{"one member", []*url.URL{MemberURI("n1")}, "n1"},
		{"escaped id round trip", []*url.URL{MemberURI(odd)}, odd},
		{"member beside another scheme", []*url.URL{u("spiffe://example.org/x"), MemberURI("n2")}, "n2"},
		{"none", nil, ""},
		{"only another scheme", []*url.URL{u("spiffe://example.org/n1")}, ""},
		{"two members", []*url.URL{MemberURI("n1"), MemberURI("n2")}, ""},
		{"other host", []*url.URL{u("jobraft://client/n1")}, ""},
		{"empty id", []*url.URL{u("jobraft://member/")}, ""},
		{"no path", []*url.URL{u("jobraft://member")}, ""},
		{"query", []*url.URL{u("jobraft://member/n1?as=n2")}, ""},
		{"user", []*url.URL{u("jobraft://n2@member/n1")}, ""},
	} {
		cert := ca.NodeCertURIs(t, "x", tc.uris...)
		got, err := CertIdentity(cert.Leaf)
		switch {
		case tc.want == "" && !errors.Is(err, ErrNoIdentity):
			t.Errorf("%s: got %q, %v; want ErrNoIdentity", tc.name, got, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if got := pkitest.MemberURI(odd).String(); got != MemberURI(odd).String() {
		t.Fatalf("pkitest.MemberURI %q differs from transport.MemberURI %q", got, MemberURI(odd))
	}
}

func TestCheckClaim(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	leaf := ca.NodeCert(t, "n1").Leaf // SANs 127.0.0.1, ::1, localhost
	h := func(id, addr string) raft.RPCHeader { return raft.RPCHeader{ID: []byte(id), Addr: []byte(addr)} }
	for _, tc := range []struct {
		name       string
		h          raft.RPCHeader
		serverName string
		ok         bool
	}{
		{"own id and address", h("n1", "127.0.0.1:7000"), "", true},
		{"own id, ipv6", h("n1", "[::1]:7000"), "", true},
		{"own id, dns", h("n1", "localhost:7000"), "", true},
		{"another member", h("n2", "127.0.0.1:7000"), "", false},
		{"no id", h("", "127.0.0.1:7000"), "", false},
		{"id prefix", h("n", "127.0.0.1:7000"), "", false},
		{"host not in certificate", h("n1", "10.1.2.3:7000"), "", false},
		{"no address", h("n1", ""), "", false},
		{"address without port", h("n1", "127.0.0.1"), "", false},
		{"shared server name: host not checked", h("n1", "10.1.2.3:7000"), "cluster.internal", true},
		{"shared server name: id still checked", h("n2", "10.1.2.3:7000"), "cluster.internal", false},
	} {
		err := checkClaim(tc.h, "n1", leaf, tc.serverName)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrWrongMember)) {
			t.Errorf("%s: %v, want ok=%v (else ErrWrongMember)", tc.name, err, tc.ok)
		}
	}
}

func TestListenChecksOwnIdentity(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	_, err := Listen(Config{BindAddr: "127.0.0.1:0", ID: "n2", TLS: ca.NodeTLS(t, "n1")})
	if !errors.Is(err, ErrTLSConfig) || !errors.Is(err, ErrWrongMember) {
		t.Fatalf("certificate of n1 for member n2: %v, want ErrTLSConfig and ErrWrongMember", err)
	}
	_, err = Listen(Config{BindAddr: "127.0.0.1:0", TLS: ca.TLS(ca.NodeCertURIs(t, "anon"))})
	if !errors.Is(err, ErrTLSConfig) || !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("certificate naming no member: %v, want ErrTLSConfig and ErrNoIdentity", err)
	}
	_, err = NewClient(ClientConfig{TLS: ca.TLS(ca.NodeCertURIs(t, "anon"))})
	if !errors.Is(err, ErrTLSConfig) || !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("client certificate naming no member: %v, want ErrTLSConfig and ErrNoIdentity", err)
	}
	m, err := Listen(Config{BindAddr: "127.0.0.1:0", TLS: ca.NodeTLS(t, "n1")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.cfg.ID != "n1" {
		t.Fatalf("ID from the certificate: %q, want n1", m.cfg.ID)
	}
}

// idServer is a TLS member "srv" whose raft consumer records every request
// that reaches raft (answering each with the matching response type), and
// whose "who" RPC answers with the caller's PeerID.
type idServer struct {
	m    *Mux
	logs *logSink
	mu   sync.Mutex
	got  []raft.WithRPCHeader
	data [][]byte // snapshot data read with each InstallSnapshot
	who  int
}

func newIDServer(t *testing.T, ca *pkitest.CA, name string) *idServer {
	t.Helper()
	cfg := ca.NodeTLS(t, name)
	s := &idServer{}
	s.m, s.logs = newTestMux(t, name, Config{TLS: cfg, HandshakeTimeout: 2 * time.Second})
	s.m.Handle("who", func(ctx context.Context, _ []byte) ([]byte, error) {
		s.mu.Lock()
		s.who++
		s.mu.Unlock()
		id, ok := PeerID(ctx)
		if !ok {
			return []byte("<none>"), nil
		}
		return []byte(id), nil
	})
	nt, err := s.m.RaftTransport(RaftOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nt.Close() })
	go func() {
		for rpc := range nt.Consumer() {
			var data []byte
			if rpc.Reader != nil {
				data, _ = io.ReadAll(rpc.Reader)
			}
			s.mu.Lock()
			s.got = append(s.got, rpc.Command.(raft.WithRPCHeader))
			s.data = append(s.data, data)
			s.mu.Unlock()
			var resp any
			switch rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				resp = &raft.AppendEntriesResponse{Term: 7, Success: true}
			case *raft.RequestVoteRequest:
				resp = &raft.RequestVoteResponse{Term: 7, Granted: true}
			case *raft.RequestPreVoteRequest:
				resp = &raft.RequestPreVoteResponse{Term: 7, Granted: true}
			case *raft.InstallSnapshotRequest:
				resp = &raft.InstallSnapshotResponse{Term: 7, Success: true}
			case *raft.TimeoutNowRequest:
				resp = &raft.TimeoutNowResponse{}
			}
			rpc.Respond(resp, nil)
		}
	}()
	return s
}

func (s *idServer) received() (n int, senders []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.got {
		senders = append(senders, string(r.GetRPCHeader().ID))
	}
	return len(s.got), senders
}

// A member holding a valid cluster certificate for "m2" can send raft
// requests as m2 only: every request type claiming another member, or an
// address its certificate is not valid for, is refused before raft sees it
// (the sender's request fails, the refusal is counted and logged), while
// its own requests — a snapshot install with its data, pipelined appends,
// and requests after that on the same connections — go through.
func TestIdentityRaftRequestsMustComeFromCertificateMember(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	srv := newIDServer(t, ca, "srv")
	cli, _ := newTestMux(t, "m2", Config{TLS: ca.NodeTLS(t, "m2"), HandshakeTimeout: 2 * time.Second})
	nt, err := cli.RaftTransport(RaftOptions{Timeout: 2 * time.Second, MaxRPCsInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	tr := cli.BindTargets(nt)
	target := raft.ServerAddress(srv.m.Addr())
	own := header(cli)
	as := func(id, addr string) raft.RPCHeader {
		return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)}
	}
	forged := []struct {
		name string
		h    raft.RPCHeader
	}{
		{"another member", as("m1", cli.Addr())},
		{"the server itself", as("srv", srv.m.Addr())},
		{"no id", as("", cli.Addr())},
		{"own id, address on a host the certificate does not name", as("m2", "10.9.8.7:7000")},
	}
	send := func(kind string, h raft.RPCHeader) error {
		switch kind {
		case "append":
			return tr.AppendEntries("srv", target, &raft.AppendEntriesRequest{RPCHeader: h, Term: 9, PrevLogEntry: 3, PrevLogTerm: 2,
				Entries: []*raft.Log{{Index: 4, Term: 9, Type: raft.LogCommand, Data: []byte("secret payload")}}}, &raft.AppendEntriesResponse{})
		case "heartbeat":
			return tr.AppendEntries("srv", target, &raft.AppendEntriesRequest{RPCHeader: h, Term: 9}, &raft.AppendEntriesResponse{})
		case "vote":
			return tr.RequestVote("srv", target, &raft.RequestVoteRequest{RPCHeader: h, Term: 9, LeadershipTransfer: true}, &raft.RequestVoteResponse{})
		case "prevote":
			return tr.(raft.WithPreVote).RequestPreVote("srv", target, &raft.RequestPreVoteRequest{RPCHeader: h, Term: 9}, &raft.RequestPreVoteResponse{})
		case "timeoutnow":
			return tr.TimeoutNow("srv", target, &raft.TimeoutNowRequest{RPCHeader: h}, &raft.TimeoutNowResponse{})
		case "snapshot":
			data := bytes.Repeat([]byte("snapshot data "), 20000) // 280 kB: several reads past the request
			return tr.InstallSnapshot("srv", target, &raft.InstallSnapshotRequest{RPCHeader: h, SnapshotVersion: 1, Term: 9,
				LastLogIndex: 10, LastLogTerm: 9, Size: int64(len(data))}, &raft.InstallSnapshotResponse{}, bytes.NewReader(data))
		}
		t.Fatalf("unknown kind %s", kind)
		return nil
	}
	kinds := []string{"append", "heartbeat", "vote", "prevote", "timeoutnow", "snapshot"}
	refused := 0
	for _, kind := range kinds {
		for _, f := range forged {
			if err := send(kind, f.h); err == nil {
				t.Errorf("%s claiming %s: accepted", kind, f.name)
			}
			refused++
		}
		// The sender's own requests still go through (on a new connection:
		// the refusal closed the last one).
		if err := send(kind, own); err != nil {
			t.Fatalf("%s as m2: %v", kind, err)
		}
	}
	// A pipeline carries several appends on one connection.
	p, err := tr.AppendEntriesPipeline("srv", target)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := p.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: own, Term: 9, PrevLogEntry: uint64(i)}, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ { // consumed in order, as raft does (a full queue would stall the pipeline)
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("pipelined append %d as m2: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("pipelined append %d: no response", i)
		}
	}
	_ = p.Close()

	n, senders := srv.received()
	if want := len(kinds) + 5; n != want {
		t.Fatalf("raft received %d requests (%v), want the %d sent as m2", n, senders, want)
	}
	for _, id := range senders {
		if id != "m2" {
			t.Fatalf("raft received a request from %q: %v", id, senders)
		}
	}
	srv.mu.Lock()
	for i, r := range srv.got {
		if _, ok := r.(*raft.InstallSnapshotRequest); ok && len(srv.data[i]) != 280000 {
			t.Errorf("snapshot data: %d bytes, want 280000", len(srv.data[i]))
		}
	}
	srv.mu.Unlock()
	waitFor(t, 5*time.Second, "refusals counted", func() bool { return srv.m.IdentityStats().Inbound == uint64(refused) })
	if !srv.logs.contains("refusing raft request") || srv.logs.contains("secret payload") || srv.logs.contains("snapshot data") {
		t.Fatalf("want refusals logged without payload bytes")
	}
}

// A member dialing an address to reach member X accepts only a server whose
// certificate names X: an impostor holding a valid cluster certificate for
// another member ("evil") at that address receives nothing, whether raft
// dials it afresh or finds a connection to it pooled; a raft dial to an
// address no request named is refused outright.
func TestIdentityRaftDialVerifiesTargetMember(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	evil := newIDServer(t, ca, "evil")
	cli, _ := newTestMux(t, "m2", Config{TLS: ca.NodeTLS(t, "m2"), HandshakeTimeout: 2 * time.Second})
	nt, err := cli.RaftTransport(RaftOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	at := raft.ServerAddress(evil.m.Addr())
	vote := func(tr raft.Transport, id raft.ServerID) error {
		return tr.RequestVote(id, at, &raft.RequestVoteRequest{RPCHeader: header(cli), Term: 9}, &raft.RequestVoteResponse{})
	}
	if err := vote(nt, "m1"); !errors.Is(err, ErrUnboundTarget) {
		t.Fatalf("unwrapped raft transport: %v, want ErrUnboundTarget", err)
	}
	tr := cli.BindTargets(nt)
	if err := vote(tr, "m1"); !errors.Is(err, ErrWrongMember) {
		t.Fatalf("dial for m1 reaching evil: %v, want ErrWrongMember", err)
	}
	// Control: addressed as itself, evil is reached (and that connection is pooled).
	if err := vote(tr, "evil"); err != nil {
		t.Fatalf("dial for evil: %v", err)
	}
	// The pooled connection, verified for evil, refuses a request for m1;
	// the next one dials afresh and is refused too.
	for i := 0; i < 2; i++ {
		if err := vote(tr, "m1"); !errors.Is(err, ErrWrongMember) {
			t.Fatalf("request %d for m1 at evil's address: %v, want ErrWrongMember", i, err)
		}
	}
	if n, senders := evil.received(); n != 1 {
		t.Fatalf("evil received %d requests (%v), want only the one addressed to it", n, senders)
	}
	if got := cli.IdentityStats().Outbound; got != 4 {
		t.Fatalf("outbound refusals: %d, want 4", got)
	}
}

// The RPC layer attributes every call to the member its certificate names
// (PeerID), refuses callers and servers whose certificate names no member,
// and, asked to reach a member (ExpectPeer), refuses a server whose
// certificate names another — on a fresh dial and on a pooled connection.
func TestIdentityRPC(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	srv := newIDServer(t, ca, "srv")
	who := func(c Caller, ctx context.Context) (string, error) {
		b, err := c.Call(ctx, srv.m.Addr(), "who", nil)
		return string(b), err
	}
	evil, _ := newTestMux(t, "evil", Config{TLS: ca.NodeTLS(t, "evil")})
	if got, err := who(evil, context.Background()); err != nil || got != "evil" {
		t.Fatalf("call from evil: handler saw %q, %v; want evil", got, err)
	}
	tool, err := NewClient(ClientConfig{TLS: ca.NodeTLS(t, "m1")})
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	if got, err := who(tool, ExpectPeer(context.Background(), "srv")); err != nil || got != "m1" {
		t.Fatalf("tool call as m1 expecting srv: handler saw %q, %v", got, err)
	}
	// Pooled connection to srv, expectation m3: refused, handler not run.
	srv.mu.Lock()
	before := srv.who
	srv.mu.Unlock()
	if _, err := who(tool, ExpectPeer(context.Background(), "m3")); !errors.Is(err, ErrNotDelivered) || !errors.Is(err, ErrWrongMember) {
		t.Fatalf("pooled, expecting m3 at srv: %v, want ErrNotDelivered and ErrWrongMember", err)
	}
	// Fresh dial expecting m3: refused at the handshake.
	m4, _ := newTestMux(t, "m4", Config{TLS: ca.NodeTLS(t, "m4")})
	if _, err := who(m4, ExpectPeer(context.Background(), "m3")); !errors.Is(err, ErrNotDelivered) || !errors.Is(err, ErrWrongMember) {
		t.Fatalf("dial expecting m3 at srv: %v, want ErrNotDelivered and ErrWrongMember", err)
	}
	srv.mu.Lock()
	after := srv.who
	srv.mu.Unlock()
	if after != before {
		t.Fatalf("handler ran %d times for refused calls", after-before)
	}
}

// A certificate from the cluster CA that names no member is refused on
// both channels as a client, and as a server. (Listen refuses such a
// certificate of its own, so the impostors here present it through a
// callback, which Listen cannot check.)
func TestIdentityRefusesCertificateWithoutMember(t *testing.T) {
	ca := pkitest.NewCA(t, "cluster")
	srv := newIDServer(t, ca, "srv")
	anon := ca.NodeCertURIs(t, "anon")
	for _, ch := range []byte{channelRaft, channelRPC} {
		c, err := tls.Dial("tcp", srv.m.Addr(), &tls.Config{Certificates: []tls.Certificate{anon}, RootCAs: ca.Pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		hdr := encodeHeader(ch)
		_, _ = c.Write(hdr[:])
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var ack [headerLen]byte
		if _, err := io.ReadFull(c, ack[:]); err == nil {
			t.Fatalf("channel %d: a certificate naming no member got an ack", ch)
		}
		_ = c.Close()
	}
	waitFor(t, 5*time.Second, "refusals counted", func() bool { return srv.m.IdentityStats().Inbound == 2 })
	if !srv.logs.contains("no member identity") {
		t.Fatal("refusal not logged")
	}

	cfg := ca.NodeTLS(t, "unused")
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &anon, nil }
	impostor := newTestMuxOrFatal(t, "impostor", Config{TLS: cfg})
	var ran atomic.Int64
	impostor.Handle("who", func(context.Context, []byte) ([]byte, error) { ran.Add(1); return nil, nil })
	cli, _ := newTestMux(t, "m1", Config{TLS: ca.NodeTLS(t, "m1"), HandshakeTimeout: 2 * time.Second})
	if _, err := cli.Call(context.Background(), impostor.Addr(), "who", nil); !errors.Is(err, ErrNotDelivered) || !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("call to a server naming no member: %v, want ErrNotDelivered and ErrNoIdentity", err)
	}
	if ran.Load() != 0 || cli.IdentityStats().Outbound != 1 {
		t.Fatalf("handler ran %d times, %d outbound refusals", ran.Load(), cli.IdentityStats().Outbound)
	}
}

func newTestMuxOrFatal(t *testing.T, name string, cfg Config) *Mux {
	t.Helper()
	m, _ := newTestMux(t, name, cfg)
	return m
}

// Without TLS nothing is authenticated: a handler has no PeerID.
func TestPeerIDWithoutTLS(t *testing.T) {
	srv, _ := newTestMux(t, "srv", Config{})
	srv.Handle("who", func(ctx context.Context, _ []byte) ([]byte, error) {
		if _, ok := PeerID(ctx); ok {
			return []byte("authenticated"), nil
		}
		return []byte("anonymous"), nil
	})
	cli, _ := newTestMux(t, "cli", Config{})
	got, err := cli.Call(ExpectPeer(context.Background(), "anyone"), srv.Addr(), "who", nil)
	if err != nil || string(got) != "anonymous" {
		t.Fatalf("plaintext call: %q, %v", got, err)
	}
}
