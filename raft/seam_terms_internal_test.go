package raft

import (
	"testing"

	"github.com/jobraft/jobraft/wal"
)

func TestDecidePastFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		v    pastView
		want pastVerdict
	}{
		{"floor 0: nothing committed", pastView{}, pastVerified},
		{"floor 0, sender unreachable", pastView{Floor: 0, Asked: false}, pastVerified},
		{"same term", pastView{Floor: 9, Asked: true, Own: 3, Sender: 3, OwnKnown: true, SenderKnown: true}, pastVerified},
		{"another term", pastView{Floor: 9, Asked: true, Own: 2, Sender: 3, OwnKnown: true, SenderKnown: true}, pastDiverged},
		{"another term, lower", pastView{Floor: 9, Asked: true, Own: 4, Sender: 3, OwnKnown: true, SenderKnown: true}, pastDiverged},
		{"own term unknown", pastView{Floor: 9, Asked: true, Sender: 3, SenderKnown: true}, pastUnverified},
		{"sender's term unknown", pastView{Floor: 9, Asked: true, Own: 3, OwnKnown: true}, pastUnverified},
		{"sender without jr.terms", pastView{Floor: 9, Old: true, Own: 3, OwnKnown: true}, pastUnverified},
		{"sender unreachable", pastView{Floor: 9, Own: 3, OwnKnown: true}, pastRetry},
	} {
		if got := decidePastFloor(c.v); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTermIndexWire(t *testing.T) {
	ti := termIndex{known: 3, through: 40, starts: []wal.TermStart{{Index: 3, Term: 1}, {Index: 10, Term: 4}, {Index: 40, Term: 6}}}
	got, err := decodeTermIndex(encodeTermIndex(ti))
	if err != nil {
		t.Fatal(err)
	}
	for index, want := range map[uint64]uint64{3: 1, 9: 1, 10: 4, 39: 4, 40: 6} {
		if term, ok := got.termAt(index); !ok || term != want {
			t.Errorf("termAt(%d) = %d %v, want %d", index, term, ok, want)
		}
	}
	for _, index := range []uint64{0, 2, 41} {
		if term, ok := got.termAt(index); ok {
			t.Errorf("termAt(%d) = %d, known; want unknown", index, term)
		}
	}
	if _, ok := (termIndex{through: 40}).termAt(5); ok {
		t.Error("an unknown term index answered")
	}
	good := encodeTermIndex(ti)
	for name, b := range map[string][]byte{
		"short":           good[:19],
		"count too large": append(append([]byte{}, good[:16]...), 0xff, 0xff, 0xff, 0xff),
		"cut":             good[:len(good)-1],
		"a start past through": encodeTermIndex(termIndex{known: 1, through: 5,
			starts: []wal.TermStart{{Index: 1, Term: 1}, {Index: 6, Term: 2}}}),
		"terms not ascending": encodeTermIndex(termIndex{known: 1, through: 9,
			starts: []wal.TermStart{{Index: 1, Term: 2}, {Index: 6, Term: 2}}}),
	} {
		if _, err := decodeTermIndex(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// decodeTermIndex never panics, allocates no more than its input
// holds, and what it accepts re-encodes to itself.
func FuzzDecodeTermIndex(f *testing.F) {
	f.Add(encodeTermIndex(termIndex{known: 1, through: 9}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ti, err := decodeTermIndex(b)
		if err != nil {
			return
		}
		if 16*len(ti.starts)+20 != len(b) {
			t.Fatalf("%d starts from %d bytes", len(ti.starts), len(b))
		}
		if string(encodeTermIndex(ti)) != string(b) {
			t.Fatal("re-encoding differs")
		}
		for _, i := range []uint64{0, 1, ti.known, ti.through, ti.through + 1} {
			ti.termAt(i)
		}
	})
}
