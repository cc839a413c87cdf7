package fsm

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"
	"time"
)

// A claim with an ID is version 3: the version 2 layout (kind count 0
// allowed) and the ID. Pinned byte by byte.
func TestClaimIDEncoding(t *testing.T) {
	c := ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Second, ID: "c"}
	const want = "0302" + "01" + "0171" + "0177" + "01" + "80a8d6b907" + "00" + "0163"
	if got := hex.EncodeToString(mustEncode(t, c)); got != want {
		t.Fatalf("claim with id: %s, want %s", got, want)
	}
	c.Kinds = []string{"k"}
	for _, x := range []ClaimCmd{c, {Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Second, ID: "c"}} {
		got, err := DecodeCommand(mustEncode(t, x))
		if err != nil || !reflect.DeepEqual(got, &x) {
			t.Fatalf("round trip of %+v: %+v, %v", x, got, err)
		}
	}
}

func claimIDs(r Result) []string {
	var ids []string
	for _, j := range r.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// A claim repeated with the same ID (a client's retry after an unknown
// outcome) answers the leases the first one granted that still run, in job
// ID order, whatever its other fields, and changes nothing; once none of
// them runs, the ID claims afresh. The index survives snapshot and
// restore.
func TestClaimIDRepeat(t *testing.T) {
	m := New()
	applyDecoded(t, m, 1, mustEncode(t, &SubmitCmd{Jobs: []NewJob{
		{ID: "b", Queue: "q", Kind: "k", Priority: 2}, {ID: "a", Queue: "q", Kind: "k", Priority: 1}, {ID: "c", Queue: "q", Kind: "k"},
	}}))
	claim := &ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Minute, ID: "x"}
	first := applyDecoded(t, m, 2, mustEncode(t, claim))
	if got := claimIDs(first); !reflect.DeepEqual(got, []string{"b", "a"}) || !first.Changed || first.Jobs[0].Lease.ClaimID != "x" {
		t.Fatalf("first claim: %v changed %v", got, first.Changed)
	}
	before := m.Digest()
	other := *claim
	other.Max, other.Queues = 1, []string{"elsewhere"}
	again := applyDecoded(t, m, 3, mustEncode(t, &other))
	if got := claimIDs(again); !reflect.DeepEqual(got, []string{"a", "b"}) || again.Changed || again.Jobs[0].Lease.Token != 2 {
		t.Fatalf("repeat: %v changed %v", got, again.Changed)
	}
	ref := New() // the same state with a refused entry at 3: only the index moved
	applyDecoded(t, ref, 1, mustEncode(t, &SubmitCmd{Jobs: []NewJob{
		{ID: "b", Queue: "q", Kind: "k", Priority: 2}, {ID: "a", Queue: "q", Kind: "k", Priority: 1}, {ID: "c", Queue: "q", Kind: "k"},
	}}))
	applyDecoded(t, ref, 2, mustEncode(t, claim))
	applyDecoded(t, ref, 3, mustEncode(t, &RetryCmd{ID: "none"}))
	if m.Digest().Sum != ref.Digest().Sum || before.Index != 2 {
		t.Fatal("a repeated claim changed the state")
	}
	applyDecoded(t, m, 4, mustEncode(t, &AckCmd{ID: "b", Token: 2}))
	var buf bytes.Buffer
	sn, _ := m.Snapshot()
	if err := sn.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Jobs{m, restored} {
		r := applyDecoded(t, x, 5, mustEncode(t, claim))
		if got := claimIDs(r); !reflect.DeepEqual(got, []string{"a"}) || r.Changed {
			t.Fatalf("repeat after an ack: %v changed %v", got, r.Changed)
		}
	}
	applyDecoded(t, m, 6, mustEncode(t, &NakCmd{ID: "a", Token: 2, Delay: time.Hour}))
	r := applyDecoded(t, m, 7, mustEncode(t, claim))
	if got := claimIDs(r); !reflect.DeepEqual(got, []string{"c"}) || !r.Changed || r.Jobs[0].Lease.Token != 7 {
		t.Fatalf("claim once its leases ended: %v changed %v", got, r.Changed)
	}
}
