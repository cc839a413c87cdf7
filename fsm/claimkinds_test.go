package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A claim without kinds encodes exactly as before kinds existed (version
// 1, same bytes); one with kinds is version 2: the version 1 fields, then
// the kinds in the caller's order. Both layouts are pinned byte by byte.
func TestClaimKindsEncoding(t *testing.T) {
	plain := ClaimCmd{Queues: []string{"q", "r"}, Worker: "w", Max: 3, TTL: time.Second}
	// version, type, 2 queues "q" "r", worker "w", max 3, ttl 1e9 ns (zig-zag varint).
	const plainHex = "0102" + "02" + "0171" + "0172" + "0177" + "03" + "80a8d6b907"
	b, err := EncodeCommand(plain)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != plainHex {
		t.Fatalf("claim without kinds: %s, want the version 1 bytes %s", got, plainHex)
	}
	kinds := plain
	kinds.Kinds = []string{"b", "a", "b"}
	const kindsHex = "0202" + "02" + "0171" + "0172" + "0177" + "03" + "80a8d6b907" + "03" + "0162" + "0161" + "0162"
	b, err = EncodeCommand(kinds)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != kindsHex {
		t.Fatalf("claim with kinds: %s, want %s", got, kindsHex)
	}
	if again, _ := EncodeCommand(&kinds); !bytes.Equal(again, b) {
		t.Fatalf("encoding is not a function of the value: %x then %x", b, again)
	}
	for _, c := range []ClaimCmd{plain, kinds} {
		enc, _ := EncodeCommand(c)
		got, err := DecodeCommand(enc)
		if err != nil || !reflect.DeepEqual(got, &c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

// Version 2 is a claim's only: any other command under it is refused as
// an unsupported version; a version 2 claim must name kinds, within the
// limit, and end where its kinds end.
func TestClaimKindsDecodeRefusals(t *testing.T) {
	v2 := func(hexs string) []byte {
		b, err := hex.DecodeString(hexs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	claim := "0202" + "01" + "0171" + "0177" + "01" + "02"
	many := claim + "41" + strings.Repeat("0161", MaxClaimKinds+1)
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"no kinds", v2(claim + "00"), ErrInvalidCommand},
		{"kinds missing", v2(claim), ErrInvalidCommand},
		{"truncated kind", v2(claim + "010261"), ErrInvalidCommand},
		{"trailing bytes", v2(claim + "016100"), ErrInvalidCommand},
		{"too many kinds", v2(many), ErrTooLarge},
		{"version 2 pause", v2("020a0171"), ErrUnsupportedVersion},
		{"version 2 submit", append([]byte{FormatVersionClaimKinds}, appendCommand(nil, &SubmitCmd{Jobs: []NewJob{{Queue: "q", Kind: "k"}}})[1:]...), ErrUnsupportedVersion},
		{"version 4 claim", v2("04" + claim[2:] + "010161"), ErrUnsupportedVersion},
		{"version 3 claim without id", v2("03" + claim[2:] + "00" + "00"), ErrInvalidCommand},
		{"version 3 claim, id missing", v2("03" + claim[2:] + "010161"), ErrInvalidCommand},
	}
	for _, tc := range cases {
		if _, err := DecodeCommand(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s (%x): %v, want %v", tc.name, tc.b, err, tc.want)
		}
		// Apply refuses it the same way and changes nothing.
		h := newHarness(t)
		h.submit(NewJob{ID: "a", Queue: "q", Kind: "a"})
		before := h.m.stateSum()
		h.index++
		r, err := DecodeResult(h.m.Apply(Entry{Index: h.index, Term: 1, Time: h.now, Cmd: tc.b}))
		if err != nil || !errors.Is(r.Err(), tc.want) || h.m.stateSum() != before {
			t.Errorf("%s: applied as %v (%v), state changed %v", tc.name, r.Err(), err, h.m.stateSum() != before)
		}
	}
}

// A claim naming kinds leases only jobs of those kinds, in the ready order
// across its queues (scheduled ones once due); every other job stays as it
// was. A claim without kinds still takes every kind. The kind index
// survives a snapshot and restore.
func TestClaimByKind(t *testing.T) {
	h := newHarness(t)
	h.ok(SubmitCmd{Jobs: []NewJob{
		{ID: "a1", Queue: "q", Kind: "a", Priority: 9},
		{ID: "b1", Queue: "q", Kind: "b"},
		{ID: "c1", Queue: "r", Kind: "c", Priority: 5},
		{ID: "b2", Queue: "r", Kind: "b", Priority: 1},
		{ID: "b3", Queue: "q", Kind: "b", RunAt: h.now.Add(time.Minute), Priority: 7},
		{ID: "a2", Queue: "r", Kind: "a"},
	}})
	ids := func(r Result) string {
		var out []string
		for _, j := range r.Jobs {
			out = append(out, j.ID)
		}
		return strings.Join(out, ",")
	}
	claim := func(max uint32, kinds ...string) Result {
		return h.ok(ClaimCmd{Queues: []string{"q", "r"}, Worker: "w", Max: max, TTL: time.Minute, Kinds: kinds})
	}
	before := h.m.stateSum()
	if r := claim(5, "x", "y"); len(r.Jobs) != 0 || h.m.stateSum() != before {
		t.Fatalf("a claim of kinds no job has leased %q or changed the state", ids(r))
	}
	if h.m.Claimable([]string{"q", "r"}, []string{"x"}, h.now) || !h.m.Claimable([]string{"r"}, []string{"x", "c"}, h.now) {
		t.Fatal("Claimable disagrees with the jobs' kinds")
	}
	if r := claim(5, "b", "b"); ids(r) != "b2,b1" {
		t.Fatalf("claim of kind b leased %q, want b2,b1 (ready order; b3 not due)", ids(r))
	}
	if h.m.Claimable([]string{"q", "r"}, []string{"b"}, h.now) || !h.m.Claimable([]string{"q"}, []string{"b"}, h.now.Add(time.Minute)) {
		t.Fatal("Claimable of the scheduled b3 before and after its run-at")
	}
	for _, id := range []string{"a1", "c1", "a2"} {
		if j, _ := h.m.Get(id); j.State != StatePending || j.Attempts != 0 {
			t.Fatalf("job %s of another kind: %s, %d attempts", id, j.State, j.Attempts)
		}
	}
	// Restore into a new instance: its kind index is rebuilt.
	snap, err := h.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	h.m = New()
	if err := h.m.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Minute)
	if r := claim(5, "c", "b"); ids(r) != "b3,c1" {
		t.Fatalf("after restore and run-at: leased %q, want b3,c1", ids(r))
	}
	if r := claim(5); ids(r) != "a1,a2" {
		t.Fatalf("claim without kinds leased %q, want a1,a2", ids(r))
	}
	if h.m.Claimable([]string{"q", "r"}, nil, h.now) {
		t.Fatal("Claimable with every job running")
	}
}
