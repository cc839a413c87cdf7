package faultnet

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Network injects network faults between members, for tests. One
// Network is shared by all members of a test cluster; each member wraps
// its raft transport with Wrap and its RPC client with WrapCaller.
//
// Faults are applied on the sending side, per directed link (from, to),
// identified by advertised addresses:
//   - a request on from->to is refused (not delivered) when the link is down
//     or the drop dice say so, else delayed, possibly duplicated, delivered;
//   - its response travels to->from: it is lost (the request WAS delivered,
//     the caller sees an error) when that direction is down or dropped, else
//     delayed.
//
// So Cut(a, b) makes a's requests to b fail and b's requests to a arrive
// without an answer. Only wrapped senders see faults: wrap every member.
//
// Rules change at run time and apply to the next decision. Random decisions
// come from one math/rand source per directed link, seeded from the network
// seed and the link, so a link's sequence of decisions replays from the seed
// (the interleaving of concurrent messages is up to the scheduler). Flapping
// is a function of the wall clock, not of the seed.
//
// A Network also observes: it records the (term, leader) of every
// AppendEntries sent through a wrapped transport (AppendEntriesSenders,
// CheckElectionSafety) and counts messages per kind (Stats).
type Network struct {
	seed int64

	mu     sync.Mutex
	rngs   map[link]*rand.Rand
	drop   float64
	dup    float64
	delay  time.Duration
	jitter time.Duration
	down   map[link]bool // partitions and cuts, directed
	// cutKinds: requests of one kind refused on a directed link (CutKind).
	cutKinds map[kindLink]bool
	lossy    map[link]float64 // per-link drop probabilities, directed
	isolated map[raft.ServerAddress]bool
	flaps    map[link]flap // keyed by both directions
	senders  map[uint64]map[Sender]struct{}
	stats    map[statKey]*Counts
	// callLosses: responses to lose once (LoseCallResponses); not
	// cleared by Heal.
	callLosses map[callLoss]int
}

// statKey attributes a count to a message kind and the request's direction
// (a lost response counts on the link of the request it answers).
type statKey struct {
	kind string
	link link
}

type link struct{ from, to raft.ServerAddress }

type flap struct {
	start  time.Time
	period time.Duration
}

// Sender is one observed AppendEntries sender: the leader identity in the
// request header for a term, and the member whose wrapped transport sent it.
type Sender struct {
	Term   uint64
	Leader raft.ServerID      // RPCHeader.ID of the request
	Addr   raft.ServerAddress // RPCHeader.Addr (or the legacy Leader field)
	From   raft.ServerAddress // local address of the wrapped transport
}

// Counts counts messages of one kind through the network.
type Counts struct {
	Sent       uint64 // requests attempted by a wrapped sender
	Refused    uint64 // requests not delivered (link down or dropped)
	Lost       uint64 // responses lost after delivery (link down or dropped)
	Duplicated uint64 // extra copies delivered
}

// Message kinds used in Stats.
const (
	KindAppendEntries   = "AppendEntries"
	KindRequestVote     = "RequestVote"
	KindRequestPreVote  = "RequestPreVote"
	KindInstallSnapshot = "InstallSnapshot"
	KindTimeoutNow      = "TimeoutNow"
	KindCall            = "Call"
)

// New returns a healthy network whose random decisions derive from
// seed. Log the seed in tests so a failure can be replayed.
func New(seed int64) *Network {
	return &Network{
		seed:     seed,
		rngs:     make(map[link]*rand.Rand),
		down:     make(map[link]bool),
		cutKinds: make(map[kindLink]bool),
		lossy:    make(map[link]float64),
		isolated: make(map[raft.ServerAddress]bool),
		flaps:    make(map[link]flap),
		senders:  make(map[uint64]map[Sender]struct{}),
		stats:    make(map[statKey]*Counts),
	}
}

// Seed returns the seed the network was created with.
func (n *Network) Seed() int64 { return n.seed }

// SetDrop sets the probability (0..1) that a message (request or response) is
// lost.
func (n *Network) SetDrop(p float64) { n.set(func() { n.drop = p }) }

// SetDuplicate sets the probability (0..1) that a delivered request is
// delivered a second time (later, its response discarded). Snapshot installs
// are never duplicated.
func (n *Network) SetDuplicate(p float64) { n.set(func() { n.dup = p }) }

// SetDelay delays every request and every response by fixed plus a uniform
// random extra in [0, jitter). Messages on one link are not reordered by the
// delay itself.
func (n *Network) SetDelay(fixed, jitter time.Duration) {
	n.set(func() { n.delay, n.jitter = fixed, jitter })
}

// Partition cuts the link between a and b in both directions.
func (n *Network) Partition(a, b raft.ServerAddress) {
	n.set(func() { n.down[link{a, b}], n.down[link{b, a}] = true, true })
}

// Cut cuts the link from -> to only: messages from `from` to `to` are lost,
// messages from `to` to `from` still arrive.
func (n *Network) Cut(from, to raft.ServerAddress) {
	n.set(func() { n.down[link{from, to}] = true })
}

// kindLink is a directed link and a message kind.
type kindLink struct {
	link
	kind string
}

// CutKind refuses every request of one kind (a Kind* constant) on the
// link from -> to; other kinds and the responses to requests sent the
// other way still pass. A test shapes an election with it (a candidate's
// votes reach a voter while its appends do not).
func (n *Network) CutKind(from, to raft.ServerAddress, kind string) {
	n.set(func() { n.cutKinds[kindLink{link{from, to}, kind}] = true })
}

// DropLink makes messages from -> to (requests one way, and the responses
// to requests sent the other way) lost with probability p (0..1), on top of
// SetDrop's network-wide probability: a lossy link. p <= 0 removes it.
func (n *Network) DropLink(from, to raft.ServerAddress, p float64) {
	n.set(func() {
		if p <= 0 {
			delete(n.lossy, link{from, to})
			return
		}
		n.lossy[link{from, to}] = p
	})
}

// Isolate cuts every link to and from node.
func (n *Network) Isolate(node raft.ServerAddress) { n.set(func() { n.isolated[node] = true }) }

// Rejoin undoes Isolate(node); partitions and cuts stay.
func (n *Network) Rejoin(node raft.ServerAddress) { n.set(func() { delete(n.isolated, node) }) }

// Flap makes the link between a and b (both directions) alternate between up
// and down every period, starting up now. A period <= 0 removes the flap.
func (n *Network) Flap(a, b raft.ServerAddress, period time.Duration) {
	n.set(func() {
		if period <= 0 {
			delete(n.flaps, link{a, b})
			delete(n.flaps, link{b, a})
			return
		}
		f := flap{start: time.Now(), period: period}
		n.flaps[link{a, b}], n.flaps[link{b, a}] = f, f
	})
}

// Heal restores a healthy network: no partitions, cuts (of kinds too), isolations, flaps,
// drops, duplicates or delays. Observations (senders, stats) are kept.
func (n *Network) Heal() {
	n.set(func() {
		n.drop, n.dup, n.delay, n.jitter = 0, 0, 0, 0
		n.down = make(map[link]bool)
		n.cutKinds = make(map[kindLink]bool)
		n.lossy = make(map[link]float64)
		n.isolated = make(map[raft.ServerAddress]bool)
		n.flaps = make(map[link]flap)
	})
}

func (n *Network) set(fn func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fn()
}

// LinkUp reports whether messages from -> to currently pass the link rules
// (ignoring random drops).
func (n *Network) LinkUp(from, to raft.ServerAddress) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkUpLocked(link{from, to}, time.Now())
}

func (n *Network) linkUpLocked(l link, now time.Time) bool {
	if n.down[l] || n.isolated[l.from] || n.isolated[l.to] {
		return false
	}
	if f, ok := n.flaps[l]; ok && (now.Sub(f.start)/f.period)%2 == 1 {
		return false
	}
	return true
}

// rngLocked returns the decision source of link l.
func (n *Network) rngLocked(l link) *rand.Rand {
	r := n.rngs[l]
	if r == nil {
		h := fnv.New64a()
		_, _ = h.Write([]byte(l.from))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(l.to))
		r = rand.New(rand.NewSource(n.seed ^ int64(h.Sum64())))
		n.rngs[l] = r
	}
	return r
}

// verdict is the fate of one message on one link.
type verdict struct {
	lost   string // non-empty: why the message is lost
	delay  time.Duration
	dup    bool
	dupLag time.Duration // extra delay of the duplicate
}

// decide draws the fate of a message on from->to. request selects request
// accounting (refused, duplicated) versus response accounting (lost).
func (n *Network) decide(kind string, from, to raft.ServerAddress, request bool) verdict {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := link{from, to}
	r := n.rngLocked(l)
	// Always draw the same number of values so one rule does not shift the
	// sequence of another.
	pDrop, pDup, j1, j2 := r.Float64(), r.Float64(), r.Int63(), r.Int63()
	reqLink := l
	if !request {
		reqLink = link{to, from}
	}
	c := n.statsLocked(statKey{kind, reqLink})
	if request {
		c.Sent++
	}
	var v verdict
	switch {
	case !n.linkUpLocked(l, time.Now()):
		v.lost = "link down"
	case request && n.cutKinds[kindLink{l, kind}]:
		v.lost = "kind cut"
	case pDrop < max(n.drop, n.lossy[l]):
		v.lost = "dropped"
	}
	if v.lost != "" {
		if request {
			c.Refused++
		} else {
			c.Lost++
		}
		return v
	}
	v.delay = n.delay
	if n.jitter > 0 {
		v.delay += time.Duration(j1 % int64(n.jitter))
		v.dupLag = time.Duration(j2 % int64(n.jitter))
	}
	if request && pDup < n.dup && kind != KindInstallSnapshot {
		v.dup = true
		c.Duplicated++
	}
	return v
}

func (n *Network) statsLocked(k statKey) *Counts {
	c := n.stats[k]
	if c == nil {
		c = &Counts{}
		n.stats[k] = c
	}
	return c
}

// Stats returns the message counts per kind (Kind* constants), all links.
func (n *Network) Stats() map[string]Counts {
	return n.sumStats(func(link) bool { return true })
}

// StatsFrom returns the message counts per kind of requests sent by from
// (and of the responses to them).
func (n *Network) StatsFrom(from raft.ServerAddress) map[string]Counts {
	return n.sumStats(func(l link) bool { return l.from == from })
}

func (n *Network) sumStats(match func(link) bool) map[string]Counts {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]Counts)
	for k, c := range n.stats {
		if !match(k.link) {
			continue
		}
		sum := out[k.kind]
		sum.Sent += c.Sent
		sum.Refused += c.Refused
		sum.Lost += c.Lost
		sum.Duplicated += c.Duplicated
		out[k.kind] = sum
	}
	return out
}

// recordAppend notes the sender of an AppendEntries request.
func (n *Network) recordAppend(from raft.ServerAddress, req *raft.AppendEntriesRequest) {
	s := Sender{Term: req.Term, Leader: raft.ServerID(req.RPCHeader.ID), Addr: raft.ServerAddress(req.RPCHeader.Addr), From: from}
	if s.Addr == "" {
		//lint:ignore SA1019 legacy senders fill only this field; read it when the header lacks the address
		s.Addr = raft.ServerAddress(req.Leader)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	set := n.senders[s.Term]
	if set == nil {
		set = make(map[Sender]struct{})
		n.senders[s.Term] = set
	}
	set[s] = struct{}{}
}

// AppendEntriesSenders returns every distinct AppendEntries sender observed
// so far, sorted by term, then leader, then address.
func (n *Network) AppendEntriesSenders() []Sender {
	n.mu.Lock()
	var out []Sender
	for _, set := range n.senders {
		for s := range set {
			out = append(out, s)
		}
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Term != b.Term {
			return a.Term < b.Term
		}
		if a.Leader != b.Leader {
			return a.Leader < b.Leader
		}
		if a.Addr != b.Addr {
			return a.Addr < b.Addr
		}
		return a.From < b.From
	})
	return out
}

// CheckElectionSafety returns an error naming every term in which
// AppendEntries were sent by more than one leader (by header ID and address,
// or by sending member); nil if there is none.
func (n *Network) CheckElectionSafety() error {
	byTerm := make(map[uint64][]Sender)
	for _, s := range n.AppendEntriesSenders() {
		byTerm[s.Term] = append(byTerm[s.Term], s)
	}
	var bad []string
	for term, ss := range byTerm {
		for _, s := range ss[1:] {
			if s.Leader != ss[0].Leader || s.Addr != ss[0].Addr || s.From != ss[0].From {
				bad = append(bad, fmt.Sprintf("term %d: %+v", term, ss))
				break
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("election safety violated: two leaders sent AppendEntries in one term: %s", strings.Join(bad, "; "))
}

// sleep waits d, or until done is closed (false), or ctx ends (false).
func sleep(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	case <-ctx.Done():
		return false
	}
}
