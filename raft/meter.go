package raft

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/jobraft/jobraft/catchup"
)

// The replication meter: hashicorp/raft exposes no per-follower match
// index or stream progress, so the leader's outbound raft transport is
// wrapped and counts, per member, what raft hands it: entries and bytes of
// appends (pipelined or not), and snapshot streams (in progress, bytes
// read from the snapshot, failed installs). The catch-up monitor reads it
// (catchup.go). It also throttles what catch-up costs the leader
// (catchup.Throttle, Policy.MaxStreamBytesPerSecond): snapshot chunks to
// any member, and appends with entries to a member the monitor marks
// catching up (a non-voter not caught up) wait their turn in one bucket
// shared by all of them. Heartbeats (appends without entries), votes and
// appends to voters pass at once. Every call passes through unchanged.
type meter struct {
	hraft.Transport
	peers    sync.Map                         // hraft.ServerID → *peerMeter
	throttle atomic.Pointer[catchup.Throttle] // nil: unlimited
	now      func() time.Time                 // time.Now
	sleep    func(time.Duration)              // time.Sleep; the send path waits here
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
	catching        atomic.Bool // set by the monitor: appends to it are throttled
}

// meterOf is the transport's meter, found when the node wraps it.
func newMeter(t hraft.Transport) (hraft.Transport, *meter) {
	m := &meter{Transport: t, now: time.Now, sleep: time.Sleep}
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

// wait holds the sender of n bytes to p (snapshot: a snapshot chunk) for
// its turn in the throttle.
func (m *meter) wait(p *peerMeter, n uint64, snapshot bool) {
	if n == 0 || (!snapshot && !p.catching.Load()) {
		return
	}
	if d := m.throttle.Load().Reserve(m.now(), int(n)); d > 0 {
		m.sleep(d)
	}
}

func (p *peerMeter) appended(args *hraft.AppendEntriesRequest) uint64 {
	var b uint64
	for _, e := range args.Entries {
		if e != nil {
			b += uint64(len(e.Data) + len(e.Extensions))
		}
	}
	p.entries.Add(uint64(len(args.Entries)))
	p.bytes.Add(b)
	return b
}

// AppendEntries implements hraft.Transport.
func (m *meter) AppendEntries(id hraft.ServerID, target hraft.ServerAddress, args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) error {
	p := m.peer(id)
	m.wait(p, p.appended(args), false)
	return m.Transport.AppendEntries(id, target, args, resp)
}

// AppendEntriesPipeline implements hraft.Transport.
func (m *meter) AppendEntriesPipeline(id hraft.ServerID, target hraft.ServerAddress) (hraft.AppendPipeline, error) {
	p, err := m.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &meteredPipeline{AppendPipeline: p, peer: m.peer(id), m: m}, nil
}

// InstallSnapshot implements hraft.Transport.
func (m *meter) InstallSnapshot(id hraft.ServerID, target hraft.ServerAddress, args *hraft.InstallSnapshotRequest, resp *hraft.InstallSnapshotResponse, data io.Reader) error {
	p := m.peer(id)
	p.installSize.Store(uint64(max(args.Size, 0)))
	p.installRead.Store(0)
	p.installing.Store(true)
	err := m.Transport.InstallSnapshot(id, target, args, resp, countingReader{r: data, p: p, m: m})
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
	m    *meter
}

// AppendEntries implements hraft.AppendPipeline.
func (p *meteredPipeline) AppendEntries(args *hraft.AppendEntriesRequest, resp *hraft.AppendEntriesResponse) (hraft.AppendFuture, error) {
	p.m.wait(p.peer, p.peer.appended(args), false)
	return p.AppendPipeline.AppendEntries(args, resp)
}

type countingReader struct {
	r io.Reader
	p *peerMeter
	m *meter
}

// Read reads a chunk of the snapshot and waits its turn in the throttle
// before raft sends it.
func (c countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.m.wait(c.p, uint64(k), true)
	c.p.installRead.Add(uint64(k))
	c.p.installBytes.Add(uint64(k))
	return k, err
}
