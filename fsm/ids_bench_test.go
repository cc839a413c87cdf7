package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// idScheme makes the ID of the i-th job submitted (of n clients, client
// i%n), as a caller of that kind would.
type idScheme struct {
	name string
	id   func(r *rand.Rand, i int) string
}

var idSchemes = []idScheme{
	// The controller's NewID: a 48-bit millisecond time and 80 random
	// bits in Crockford base32; the clock advances one millisecond per 40
	// jobs (40k submits/s).
	{"generated", func(r *rand.Rand, i int) string {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(1_700_000_000_000+i/40)<<16)
		binary.BigEndian.PutUint64(b[6:14], r.Uint64())
		binary.BigEndian.PutUint16(b[14:], uint16(r.Uint32()))
		return crockford(b)
	}},
	// 64 clients, each numbering its own jobs; each round of 64 holds one
	// job of every client, in an order of their arrival (a permutation
	// per round).
	{"sequence", func(r *rand.Rand, i int) string {
		if i%64 == 0 {
			r.Shuffle(len(arrival), func(a, b int) { arrival[a], arrival[b] = arrival[b], arrival[a] })
		}
		return fmt.Sprintf("client-%d-%010d", arrival[i%64], i/64)
	}},
	// Random UUIDv4s.
	{"uuid", func(r *rand.Rand, _ int) string {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], r.Uint64())
		binary.BigEndian.PutUint64(b[8:], r.Uint64())
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:])
	}},
}

// arrival is the sequence scheme's order of clients in the current round
// (benchmarks run one at a time).
var arrival = func() (a [64]int) {
	for i := range a {
		a[i] = i
	}
	return a
}()

func crockford(b [16]byte) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	var s [26]byte
	for i := 25; i >= 0; i-- {
		s[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(s[:])
}

// BenchmarkApplySubmitIDs: submits of 64 jobs per entry (what 64 clients'
// coalesced submits make) with client IDs of each scheme, on a state
// already holding 200k jobs of that scheme; with snap, a snapshot is taken
// (and released) every 8,192 jobs, so the copy-on-write job tree copies
// the nodes each insert touches afresh. One op is one job.
func BenchmarkApplySubmitIDs(b *testing.B) {
	const round, held, snapEvery = 64, 200_000, 8192
	p := bytes.Repeat([]byte{'x'}, 256)
	for _, sc := range idSchemes {
		for _, snap := range []bool{false, true} {
			b.Run(fmt.Sprintf("ids=%s/snap=%v", sc.name, snap), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				m := New()
				var index uint64
				seq := 0
				entries := func(jobs int) [][]byte {
					var out [][]byte
					for done := 0; done < jobs; done += round {
						js := make([]NewJob, round)
						for i := range js {
							js[i] = NewJob{ID: sc.id(r, seq), Queue: "q", Kind: "k", Payload: p}
							seq++
						}
						c, err := EncodeCommand(&SubmitCmd{Jobs: js})
						if err != nil {
							b.Fatal(err)
						}
						out = append(out, c)
					}
					return out
				}
				apply := func(cmd []byte) {
					index++
					m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: cmd})
				}
				for _, c := range entries(held) {
					apply(c)
				}
				cmds := entries(b.N)
				b.ReportAllocs()
				cpu := startCPU(b)
				for i, c := range cmds {
					if snap && i%(snapEvery/round) == 0 {
						s, err := m.Snapshot()
						if err != nil {
							b.Fatal(err)
						}
						s.Release()
					}
					apply(c)
				}
				cpu.stop(b, len(cmds)*round)
				if m.Len() != held+len(cmds)*round {
					b.Fatalf("%d jobs held, want %d", m.Len(), held+len(cmds)*round)
				}
			})
		}
	}
}
