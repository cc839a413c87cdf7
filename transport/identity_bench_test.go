package transport

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/pkitest"
)

// BenchmarkRaftAppendTLS sends synchronous appends of 64 entries of 256
// bytes over mutual TLS, through the inbound identity gate: its cost is
// decoding each request's header (skipping the entries) before raft
// decodes it again.
func BenchmarkRaftAppendTLS(b *testing.B) {
	ca := pkitest.NewCA(b, "cluster")
	srv, err := Listen(Config{BindAddr: "127.0.0.1:0", TLS: ca.NodeTLS(b, "srv")})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	snt, err := srv.RaftTransport(RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer snt.Close()
	go func() {
		for rpc := range snt.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
		}
	}()
	cli, err := Listen(Config{BindAddr: "127.0.0.1:0", TLS: ca.NodeTLS(b, "m1")})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	cnt, err := cli.RaftTransport(RaftOptions{Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cnt.Close()
	tr := cli.BindTargets(cnt)
	req := &raft.AppendEntriesRequest{RPCHeader: header(cli), Term: 2, PrevLogEntry: 10, PrevLogTerm: 2}
	for i := 0; i < 64; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(11 + i), Term: 2, Type: raft.LogCommand, Data: make([]byte, 256), AppendedAt: time.Now()})
	}
	b.SetBytes(64 * 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tr.AppendEntries("srv", raft.ServerAddress(srv.Addr()), req, &raft.AppendEntriesResponse{}); err != nil {
			b.Fatal(err)
		}
	}
}
