package walcompare

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jobraft/jobraft/internal/logdigest"
	"github.com/jobraft/jobraft/transport"
)

// Dial makes a live member of the raft.Node at addr: its log is read over
// the node's RPC channel (DigestMethod), never stopping or changing it.
// tlsConfig is the client side of the cluster's mutual TLS (a certificate
// and the cluster CA), nil for plaintext. Dial checks the member answers.
func Dial(ctx context.Context, name, addr string, tlsConfig *tls.Config) (Member, error) {
	c, err := transport.NewClient(transport.ClientConfig{TLS: tlsConfig})
	if err != nil {
		return nil, fmt.Errorf("walcompare: %s: %w", name, err)
	}
	m := &liveMember{name: name, addr: addr, c: c, info: MemberInfo{Name: name, Source: "live", Where: addr}}
	if _, err := m.call(ctx, logdigest.Request{Op: logdigest.OpInfo}); err != nil {
		c.Close()
		return nil, err
	}
	return m, nil
}

// liveMember is a member served over the RPC channel.
type liveMember struct {
	name, addr string
	c          transport.Caller
	calls      atomic.Int64
	mu         sync.Mutex
	info       MemberInfo
}

func (m *liveMember) Name() string { return m.name }

func (m *liveMember) Info() MemberInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.info
}

func (m *liveMember) Close() error {
	if c, ok := m.c.(*transport.Client); ok {
		return c.Close()
	}
	return nil
}

func (m *liveMember) call(ctx context.Context, q logdigest.Request) (*logdigest.Reply, error) {
	req, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	m.calls.Add(1)
	out, err := m.c.Call(ctx, m.addr, DigestMethod, req)
	if err != nil {
		return nil, fmt.Errorf("walcompare: %s (%s): %s: %w", m.name, m.addr, q.Op, transport.ElideAddr(err, m.addr))
	}
	var rep logdigest.Reply
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("walcompare: %s (%s): bad reply: %w", m.name, m.addr, err)
	}
	m.mu.Lock()
	m.info.First, m.info.Last, m.info.Floor, m.info.HasFloor = rep.First, rep.Last, rep.Floor, rep.HasFloor
	m.mu.Unlock()
	return &rep, nil
}

// Scan reads the member's entries in chunks of logdigest.MaxEntries.
func (m *liveMember) Scan(ctx context.Context, from, to uint64, fn func(uint64, *View) bool) error {
	rep, err := m.call(ctx, logdigest.Request{Op: logdigest.OpInfo})
	if err != nil {
		return err
	}
	if rep.Last == 0 {
		return nil
	}
	lo, hi := max(from, rep.First), rep.Last
	if to != 0 {
		hi = min(hi, to)
	}
	for a := lo; a <= hi && a >= lo; a += logdigest.MaxEntries {
		b := min(hi, a+logdigest.MaxEntries-1)
		rep, err := m.call(ctx, logdigest.Request{Op: logdigest.OpEntries, From: a, To: b})
		if err != nil {
			return err
		}
		for i := range rep.Entries {
			v := viewOf(&rep.Entries[i].View)
			if !fn(rep.Entries[i].Index, &v) {
				return nil
			}
		}
	}
	return nil
}

// compareDigests compares live members by hierarchical range digests.
func compareDigests(ctx context.Context, ms []*liveMember, names []string, opts Options) (*Report, error) {
	fanout, leaf := opts.Fanout, opts.Leaf
	if fanout < 2 {
		fanout = 16
	}
	if leaf < 1 {
		leaf = 64
	}
	fanout, leaf = min(fanout, logdigest.MaxParts), min(leaf, logdigest.MaxEntries)
	var calls0 int64
	for _, m := range ms {
		calls0 += m.calls.Load()
	}
	infos := make([]*logdigest.Reply, len(ms))
	if err := each(ctx, ms, func(ctx context.Context, i int, m *liveMember) (err error) {
		infos[i], err = m.call(ctx, logdigest.Request{Op: logdigest.OpInfo})
		return err
	}); err != nil {
		return nil, err
	}
	// The compared range: from the lowest first to the highest last.
	var lo, hi uint64
	for _, in := range infos {
		if in.Last == 0 {
			continue
		}
		if lo == 0 || in.First < lo {
			lo = in.First
		}
		hi = max(hi, in.Last)
	}
	if opts.From > lo {
		lo = opts.From
	}
	if opts.To != 0 && opts.To < hi {
		hi = opts.To
	}
	b := newBuilder(names)
	d := &digestSearch{ms: ms, infos: infos, b: b, fanout: fanout, leaf: uint64(leaf)}
	if lo != 0 && lo <= hi {
		// Cut [lo, hi] where the set of members holding the indexes changes.
		cuts := []uint64{lo, hi + 1}
		for _, in := range infos {
			for _, c := range []uint64{in.First, in.Last + 1} {
				if in.Last != 0 && c > lo && c <= hi {
					cuts = append(cuts, c)
				}
			}
		}
		sortU64(cuts)
		for k := 0; k+1 < len(cuts); k++ {
			a, z := cuts[k], cuts[k+1]-1
			if a > z {
				continue
			}
			var held []int
			for i, in := range infos {
				switch {
				case in.Last == 0 || in.Last < a:
					b.lag(i, Missing, a, z+1)
				case in.First > z:
					b.lag(i, Compacted, a, z+1)
				default:
					held = append(held, i)
				}
			}
			if err := d.search(ctx, a, z, held); err != nil {
				return nil, err
			}
		}
	} else {
		lo, hi = 0, 0
	}
	r := &Report{Mode: "digest"}
	for _, m := range ms {
		r.Members = append(r.Members, m.Info())
		r.Calls += m.calls.Load()
	}
	r.Calls -= calls0
	b.finish(r, lo, hi, opts)
	return r, nil
}

type digestSearch struct {
	ms     []*liveMember
	infos  []*logdigest.Reply
	b      *builder
	fanout int
	leaf   uint64
	views  []View
}

// search finds the differing indexes of [a, z], held by the members held
// (and by no other), in ascending order.
func (d *digestSearch) search(ctx context.Context, a, z uint64, held []int) error {
	if len(held) == 0 {
		return nil
	}
	if z-a+1 <= d.leaf {
		return d.leafRange(ctx, a, z, held)
	}
	digs := make([][]Digest, len(d.ms))
	err := each(ctx, d.ms, func(ctx context.Context, i int, m *liveMember) error {
		if !contains(held, i) {
			return nil
		}
		rep, err := m.call(ctx, logdigest.Request{Op: logdigest.OpDigests, From: a, To: z, Parts: d.fanout})
		if err == nil && len(rep.Digests) != len(SplitRange(a, z, d.fanout)) {
			err = fmt.Errorf("walcompare: %s: %d digests for [%d, %d] in %d parts", m.name, len(rep.Digests), a, z, d.fanout)
		}
		digs[i] = rep.Digests
		return err
	})
	if err != nil {
		return err
	}
	for k, r := range SplitRange(a, z, d.fanout) {
		ref := digs[held[0]][k]
		differ := ref.Bad > 0 || ref.Count != r[1]-r[0]+1
		for _, i := range held[1:] {
			if !digs[i][k].Equal(ref) {
				differ = true
			}
		}
		if differ {
			if err := d.search(ctx, r[0], r[1], held); err != nil {
				return err
			}
		}
	}
	return nil
}

// leafRange fetches the entries of [a, z] from the members holding them and
// classifies every index.
func (d *digestSearch) leafRange(ctx context.Context, a, z uint64, held []int) error {
	ents := make([][]logdigest.Entry, len(d.ms))
	err := each(ctx, d.ms, func(ctx context.Context, i int, m *liveMember) error {
		if !contains(held, i) {
			return nil
		}
		rep, err := m.call(ctx, logdigest.Request{Op: logdigest.OpEntries, From: a, To: z})
		if err == nil {
			ents[i] = rep.Entries
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.views == nil {
		d.views = make([]View, len(d.ms))
	}
	pos := make([]int, len(d.ms))
	for ix := a; ix <= z; ix++ {
		for i := range d.ms {
			in := d.infos[i]
			switch {
			case contains(held, i) && pos[i] < len(ents[i]) && ents[i][pos[i]].Index == ix:
				d.views[i] = viewOf(&ents[i][pos[i]].View)
				pos[i]++
			case in.Last != 0 && in.First > ix:
				d.views[i] = View{Class: Compacted}
			default:
				d.views[i] = View{Class: Missing}
			}
		}
		d.b.index(ix, Classify(d.views), d.views)
	}
	return nil
}

// each runs fn for every member concurrently and returns the first error.
func each(ctx context.Context, ms []*liveMember, fn func(context.Context, int, *liveMember) error) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(ctx, i, m)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func sortU64(s []uint64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
