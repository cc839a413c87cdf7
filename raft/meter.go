package raft

import (
	"io"
	"sync"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
)

// The replication meter: hashicorp/raft exposes no per-follower match
// index or stream progress, so the leader's outbound raft transport is
// wrapped and counts, per member, what raft hands it: entries and bytes of
// appends (pipelined or not), and snapshot streams (in progress, bytes
// read from the snapshot, failed installs). The catch-up monitor reads it
// (catchup.go). It only counts: every call passes through unchanged.
type meter struct {
	hraft.Transport
	peers sync.Map // hraft.ServerID → *peerMeter
}

// meterPreVote is meter over a transport with pre-vote.
type meterPreVote struct{ *meter }

var (
	_ hraft.Transport      = (*meter)(nil)
	_ hraft.WithClose      = (*meter)(nil)
	_ hraft.WithPreVote    = meterPreVote{}
	_ hraft.AppendPipeline = (*meteredPipeline)(nil)
)

// peerMeter counts what was sent to one member (cumulative).
type peerMeter struct {
	entries, bytes  atomic.Uint64 // appends
	installing      atomic.Bool
	installSize     atomic.Uint64 // size of the snapshot being streamed
	installRead     atomic.Uint64 // bytes of it read so far
	installBytes    atomic.Uint64 // snapshot bytes streamed, all installs
	installs        atomic.Uint64 // installs finished (success or not)
	installFailures atomic.Uint64
}

// meterOf is the transport's meter, found when the node wraps it.
func newMeter(t hraft.Transport) (hraft.Transport, *meter) {
	m := &meter{Transport: t}
	if _, ok := t.(hraft.WithPreVote); ok {
		return meterPreVote{m}, m
	}
	return m, m
}

func (m *meter) peer(id hraft.ServerID) *peerMeter {
	if p, ok := m.peers.Load(id); ok {
		return p.(*peerMeter)
	}
	p, _ := m.peers.LoadOrStore(id, &peerMeter{})
	return p.(*peerMeter)
}

func (p *peerMeter) appended(args *hraft.AppendEntriesRequest) {
	var b uint64
	for _, e := range args.Entries {
		if e != nil {
			b += uint64(len(e.Data) + len(e.Extensions))
		}
	}
	p.entries.Add(uint64(len(args.Entries)))
	p.bytes.Add(b)
}

// AppendEntries implements hraft.Transport.
func (m *meter) AppendEntries(id hraft.ServerID, target hraft.ServerAddress, args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) error {
	m.peer(id).appended(args)
	return m.Transport.AppendEntries(id, target, args, resp)
}

// AppendEntriesPipeline implements hraft.Transport.
func (m *meter) AppendEntriesPipeline(id hraft.ServerID, target hraft.ServerAddress) (hraft.AppendPipeline, error) {
	p, err := m.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &meteredPipeline{AppendPipeline: p, peer: m.peer(id)}, nil
}

// InstallSnapshot implements hraft.Transport.
func (m *meter) InstallSnapshot(id hraft.ServerID, target hraft.ServerAddress, args *hraft.InstallSnapshotRequest, resp *hraft.InstallSnapshotResponse, data io.Reader) error {
	p := m.peer(id)
	p.installSize.Store(uint64(max(args.Size, 0)))
	p.installRead.Store(0)
	p.installing.Store(true)
	err := m.Transport.InstallSnapshot(id, target, args, resp, countingReader{r: data, p: p})
	p.installing.Store(false)
	p.installs.Add(1)
	if err != nil || !resp.Success {
		p.installFailures.Add(1)
	}
	return err
}

// Close implements hraft.WithClose.
func (m *meter) Close() error {
	if c, ok := m.Transport.(hraft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// RequestPreVote implements hraft.WithPreVote.
func (m meterPreVote) RequestPreVote(id hraft.ServerID, target hraft.ServerAddress, args *hraft.RequestPreVoteRequest, resp *hraft.RequestPreVoteResponse) error {
	return m.Transport.(hraft.WithPreVote).RequestPreVote(id, target, args, resp)
}

type meteredPipeline struct {
	hraft.AppendPipeline
	peer *peerMeter
}

// AppendEntries implements hraft.AppendPipeline.
func (p *meteredPipeline) AppendEntries(args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) (hraft.AppendFuture, error) {
	p.peer.appended(args)
	return p.AppendPipeline.AppendEntries(args, resp)
}

type countingReader struct {
	r io.Reader
	p *peerMeter
}

func (c countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.p.installRead.Add(uint64(k))
	c.p.installBytes.Add(uint64(k))
	return k, err
}
