package logdigest

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
)

// Digest summarises the entries a member holds in [From, To] (inclusive).
// Its JSON form is part of the wire format.
type Digest struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Count uint64 `json:"count"` // entries held
	// Bad counts entries that fail their checks (corrupt, or a lost
	// payload): a range with Bad > 0 is always inspected.
	Bad uint64 `json:"bad"`
	// Sum is a 128-bit hash of (index, term, type, length, payload CRC) of
	// every entry held, and of the failure of every bad one, summed per
	// 64-bit lane. It is not cryptographic: it finds accidents, not
	// adversaries.
	Sum [2]uint64 `json:"sum"`
}

// Equal reports whether two members' digests of one range match.
func (d Digest) Equal(o Digest) bool {
	return d.From == o.From && d.To == o.To && d.Count == o.Count && d.Bad == o.Bad && d.Sum == o.Sum
}

// SplitRange splits [from, to] (inclusive) into min(parts, to-from+1)
// contiguous inclusive sub-ranges, in order; the first (to-from+1) mod
// parts of them are one index longer than the others. It returns nil when
// to < from or parts <= 0. Both sides of the protocol use it, so its
// result is part of the protocol. It handles the whole uint64 range.
func SplitRange(from, to uint64, parts int) [][2]uint64 {
	if to < from || parts <= 0 {
		return nil
	}
	if parts == 1 {
		return [][2]uint64{{from, to}}
	}
	// The range holds span+1 indexes, which overflows for [0, MaxUint64]:
	// compute the sizes from span.
	span, p := to-from, uint64(parts)
	if span < p-1 {
		p = span + 1
	}
	step, rem := span/p, span%p+1 // span+1 == step*p + rem, 1 <= rem <= p
	if rem == p {
		step, rem = step+1, 0 // p >= 2, so step+1 does not overflow
	}
	out := make([][2]uint64, 0, p)
	lo := from
	for i := uint64(0); i < p; i++ {
		size := step
		if i < rem {
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
	if v.Lost() {
		a ^= 1<<62 ^ uint64(v.StampLen)<<20 ^ uint64(v.StampCRC)
	}
	h1 := mix64(mix64(ix^0x9e3779b97f4a7c15) ^ mix64(v.Term+0x632be59bd9b4e019) ^ mix64(a))
	h2 := mix64(mix64(ix+0xd6e8feb86659fd93) ^ mix64(v.Term^0xa0761d6478bd642f) ^ mix64(a+0xe7037ed1a0b428db))
	return h1, h2
}

// RangeDigests returns the digests of s over the sub-ranges of [from, to]
// given by SplitRange(from, to, parts). It reads every entry s holds in the
// range with GetLog (see ReadView); memory is independent of the range's
// size. Errors are the store's FirstIndex or LastIndex errors, or ctx's.
func RangeDigests(ctx context.Context, s raft.LogStore, from, to uint64, parts int) ([]Digest, error) {
	first, err := s.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("logdigest: first index: %w", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("logdigest: last index: %w", err)
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
			if !ReadView(s, ix, &l, &v) {
				continue
			}
			d.Count++
			if v.Corrupt || v.Lost() {
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
