package walcompare

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/raft"
)

// DigestMethod is the RPC method a raft.Node serves range digests of its
// log on (its status RPC channel). See ServeDigest for the protocol.
const DigestMethod = "jr.walcompare.digest"

// Digest summarises the entries a member holds in [From, To].
type Digest struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Count uint64 `json:"count"` // entries held
	// Bad counts entries that fail their checks (corrupt, or a lost
	// payload): a range with Bad > 0 is always inspected.
	Bad uint64 `json:"bad"`
	// Sum is a 128-bit hash of (index, term, type, length, payload CRC) of
	// every entry held, and of the failure of every bad one. It is not
	// cryptographic: it finds accidents, not adversaries.
	Sum [2]uint64 `json:"sum"`
}

// Equal reports whether two members' digests of one range match.
func (d Digest) Equal(o Digest) bool {
	return d.From == o.From && d.To == o.To && d.Count == o.Count && d.Bad == o.Bad && d.Sum == o.Sum
}

// SplitRange splits [from, to] into at most parts contiguous sub-ranges of
// near-equal size, in order. Both sides of the digest protocol use it.
func SplitRange(from, to uint64, parts int) [][2]uint64 {
	if to < from || parts <= 0 {
		return nil
	}
	n := to - from + 1
	if uint64(parts) > n {
		parts = int(n)
	}
	out := make([][2]uint64, 0, parts)
	step, rem := n/uint64(parts), n%uint64(parts)
	lo := from
	for i := 0; i < parts; i++ {
		size := step
		if uint64(i) < rem {
			size++
		}
		out = append(out, [2]uint64{lo, lo + size - 1})
		lo += size
	}
	return out
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// entryHash is the contribution of one view at index ix to a digest.
func entryHash(ix uint64, v *View) (uint64, uint64) {
	a := uint64(v.Type)<<56 ^ uint64(v.Len)<<24 ^ uint64(v.CRC)
	if v.Corrupt {
		a ^= 1 << 63
	}
	if v.lost() {
		a ^= 1<<62 ^ uint64(v.StampLen)<<20 ^ uint64(v.StampCRC)
	}
	h1 := mix64(mix64(ix^0x9e3779b97f4a7c15) ^ mix64(v.Term+0x632be59bd9b4e019) ^ mix64(a))
	h2 := mix64(mix64(ix+0xd6e8feb86659fd93) ^ mix64(v.Term^0xa0761d6478bd642f) ^ mix64(a+0xe7037ed1a0b428db))
	return h1, h2
}

// RangeDigests returns the digests of s over the sub-ranges of [from, to]
// given by SplitRange(from, to, parts). It reads every entry in the range
// with GetLog; memory is independent of the range's size.
func RangeDigests(s raft.LogStore, from, to uint64, parts int) ([]Digest, error) {
	return rangeDigests(context.Background(), s, from, to, parts)
}

func rangeDigests(ctx context.Context, s raft.LogStore, from, to uint64, parts int) ([]Digest, error) {
	first, err := s.FirstIndex()
	if err != nil {
		return nil, err
	}
	last, err := s.LastIndex()
	if err != nil {
		return nil, err
	}
	var l raft.Log
	var v View
	var out []Digest
	for _, r := range SplitRange(from, to, parts) {
		d := Digest{From: r[0], To: r[1]}
		lo, hi := max(r[0], first), min(r[1], last)
		for ix := lo; last != 0 && ix <= hi && ix >= lo; ix++ {
			if ix&16383 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if !viewOf(s, ix, &l, &v) {
				continue
			}
			d.Count++
			if v.Corrupt || v.lost() {
				d.Bad++
			}
			h1, h2 := entryHash(ix, &v)
			d.Sum[0] += h1
			d.Sum[1] += h2
		}
		out = append(out, d)
	}
	return out, nil
}

// The wire form of DigestMethod (JSON).
type digestRequest struct {
	// Op: "info" (bounds and floor only), "digests" (Parts sub-range
	// digests of [From, To]) or "entries" (the views of [From, To], at most
	// maxEntries).
	Op    string `json:"op"`
	From  uint64 `json:"from,omitempty"`
	To    uint64 `json:"to,omitempty"`
	Parts int    `json:"parts,omitempty"`
}

type wireEntry struct {
	Index uint64 `json:"i"`
	View
}

type digestReply struct {
	First    uint64      `json:"first"`
	Last     uint64      `json:"last"`
	Floor    uint64      `json:"floor"`
	HasFloor bool        `json:"has_floor"`
	Digests  []Digest    `json:"digests,omitempty"`
	Entries  []wireEntry `json:"entries,omitempty"`
}

const (
	maxParts   = 1024
	maxEntries = 4096
)

// ServeDigest answers one DigestMethod request about s, a member's log,
// with floor its persisted commit floor (nil: none). A raft.Node serves it
// on its RPC channel; it only reads.
func ServeDigest(ctx context.Context, s raft.LogStore, floor func() uint64, req []byte) ([]byte, error) {
	var q digestRequest
	if err := json.Unmarshal(req, &q); err != nil {
		return nil, fmt.Errorf("walcompare: bad digest request: %w", err)
	}
	var rep digestReply
	var err error
	if rep.First, err = s.FirstIndex(); err != nil {
		return nil, err
	}
	if rep.Last, err = s.LastIndex(); err != nil {
		return nil, err
	}
	if rep.Last == 0 {
		rep.First = 0
	}
	if floor != nil {
		rep.Floor, rep.HasFloor = floor(), true
	}
	switch q.Op {
	case "info":
	case "digests":
		if q.Parts <= 0 || q.Parts > maxParts || q.To < q.From {
			return nil, fmt.Errorf("walcompare: bad digest request: [%d, %d] in %d parts", q.From, q.To, q.Parts)
		}
		if rep.Digests, err = rangeDigests(ctx, s, q.From, q.To, q.Parts); err != nil {
			return nil, err
		}
	case "entries":
		if q.To < q.From || q.To-q.From >= maxEntries {
			return nil, fmt.Errorf("walcompare: bad entries request: [%d, %d] (at most %d entries)", q.From, q.To, maxEntries)
		}
		var l raft.Log
		var v View
		for ix := max(q.From, rep.First); ix <= min(q.To, rep.Last) && rep.Last != 0; ix++ {
			if viewOf(s, ix, &l, &v) {
				rep.Entries = append(rep.Entries, wireEntry{Index: ix, View: v})
			}
		}
	default:
		return nil, fmt.Errorf("walcompare: unknown digest op %q", q.Op)
	}
	return json.Marshal(rep)
}
