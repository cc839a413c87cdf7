package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Secrets that must never appear in a refusal's detail: results, errors
// and reasons of the requests involved.
var repeatSecrets = []string{"RESULT-ONE", "RESULT-TWO", "ERR-ONE", "ERR-TWO", "REASON-ONE", "REASON-TWO"}

// A repeat of a lease operation on a lease that already ended succeeds only
// when it is the same request: same verb, same token, same result (ack),
// error and delay (nak), reason (term). Every other request under that
// token is refused ErrStaleLease, changes nothing, and its detail says how
// the lease ended, without any request's bytes.
func TestRepeatIsTheSameRequestOrStale(t *testing.T) {
	type tokens struct{ t1, t2 uint64 }
	ack1 := func(tk tokens) Command { return AckCmd{ID: "j", Token: tk.t1, Result: []byte("RESULT-ONE")} }
	nak1 := func(tk tokens) Command {
		return NakCmd{ID: "j", Token: tk.t1, Delay: time.Second, Error: "ERR-ONE"}
	}
	term1 := func(tk tokens) Command { return TermCmd{ID: "j", Token: tk.t1, Reason: "REASON-ONE"} }
	cases := []struct {
		name string
		// setup ends (or supersedes) the first lease of job j, t1.
		setup func(h *harness, tk *tokens)
		cmd   func(tk tokens) Command
		// ended: "" for a repeat (OK, unchanged); else the word of the
		// stale refusal's detail: how t1's lease ended.
		ended string
	}{
		{"ack repeated", func(h *harness, tk *tokens) { h.ok(ack1(*tk)) }, ack1, ""},
		{"ack with another result", func(h *harness, tk *tokens) { h.ok(ack1(*tk)) },
			func(tk tokens) Command { return AckCmd{ID: "j", Token: tk.t1, Result: []byte("RESULT-TWO")} }, "acked"},
		{"ack without the result", func(h *harness, tk *tokens) { h.ok(ack1(*tk)) },
			func(tk tokens) Command { return AckCmd{ID: "j", Token: tk.t1} }, "acked"},
		{"ack with a result of the same length", func(h *harness, tk *tokens) { h.ok(ack1(*tk)) },
			func(tk tokens) Command { return AckCmd{ID: "j", Token: tk.t1, Result: []byte("RESULT-ONF")} }, "acked"},
		{"empty ack repeated (nil and empty are the same result)", func(h *harness, tk *tokens) { h.ok(AckCmd{ID: "j", Token: tk.t1}) },
			func(tk tokens) Command { return AckCmd{ID: "j", Token: tk.t1, Result: []byte{}} }, ""},
		{"nak repeated", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) }, nak1, ""},
		{"nak with another error", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) },
			func(tk tokens) Command { return NakCmd{ID: "j", Token: tk.t1, Delay: time.Second, Error: "ERR-TWO"} }, "naked"},
		{"nak with another delay", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) },
			func(tk tokens) Command {
				return NakCmd{ID: "j", Token: tk.t1, Delay: 2 * time.Second, Error: "ERR-ONE"}
			}, "naked"},
		{"nak with the backoff's delay instead", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) },
			func(tk tokens) Command { return NakCmd{ID: "j", Token: tk.t1, Error: "ERR-ONE"} }, "naked"},
		{"nak without delay repeated", func(h *harness, tk *tokens) { h.ok(NakCmd{ID: "j", Token: tk.t1, Error: "ERR-ONE"}) },
			func(tk tokens) Command { return NakCmd{ID: "j", Token: tk.t1, Error: "ERR-ONE"} }, ""},
		{"nak repeated while the next lease runs", func(h *harness, tk *tokens) {
			h.ok(nak1(*tk))
			h.now = h.now.Add(2 * time.Second)
			tk.t2 = h.claim1("q", time.Minute).Lease.Token
		}, nak1, ""},
		{"nak repeated after the next lease ended", func(h *harness, tk *tokens) {
			h.ok(nak1(*tk))
			h.now = h.now.Add(2 * time.Second)
			tk.t2 = h.claim1("q", time.Minute).Lease.Token
			h.ok(AckCmd{ID: "j", Token: tk.t2, Result: []byte("RESULT-TWO")})
		}, nak1, "superseded"},
		{"term repeated", func(h *harness, tk *tokens) { h.ok(term1(*tk)) }, term1, ""},
		{"term with another reason", func(h *harness, tk *tokens) { h.ok(term1(*tk)) },
			func(tk tokens) Command { return TermCmd{ID: "j", Token: tk.t1, Reason: "REASON-TWO"} }, "termed"},
		{"term without a reason", func(h *harness, tk *tokens) { h.ok(term1(*tk)) },
			func(tk tokens) Command { return TermCmd{ID: "j", Token: tk.t1} }, "termed"},
		{"ack after a nak", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) }, ack1, "naked"},
		{"nak after an ack", func(h *harness, tk *tokens) { h.ok(ack1(*tk)) }, nak1, "acked"},
		{"term after a nak", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) }, term1, "naked"},
		{"ack after a term", func(h *harness, tk *tokens) { h.ok(term1(*tk)) }, ack1, "termed"},
		{"nak with the term's reason after a term", func(h *harness, tk *tokens) { h.ok(term1(*tk)) },
			func(tk tokens) Command { return NakCmd{ID: "j", Token: tk.t1, Error: "REASON-ONE"} }, "termed"},
		{"extend after an ack", func(h *harness, tk *tokens) { h.ok(ack1(*tk)) },
			func(tk tokens) Command { return ExtendCmd{ID: "j", Token: tk.t1} }, "acked"},
		{"extend after a nak", func(h *harness, tk *tokens) { h.ok(nak1(*tk)) },
			func(tk tokens) Command { return ExtendCmd{ID: "j", Token: tk.t1} }, "naked"},
		{"ack after expiry", func(h *harness, tk *tokens) {
			h.now = h.now.Add(2 * time.Minute)
			h.ok(ExpireCmd{LeaderSince: baseTime})
		}, ack1, "expired"},
		{"nak after a cancel", func(h *harness, tk *tokens) { h.ok(CancelCmd{ID: "j", Reason: "REASON-TWO"}) }, nak1, "canceled"},
		{"ack of a lease a later claim superseded", func(h *harness, tk *tokens) {
			h.now = h.now.Add(2 * time.Minute)
			h.ok(ExpireCmd{LeaderSince: baseTime})
			h.now = h.now.Add(time.Hour)
			tk.t2 = h.claim1("q", time.Minute).Lease.Token
			h.ok(ExtendCmd{ID: "j", Token: tk.t2}) // the expiry is no longer the last entry
			h.now = h.now.Add(2 * time.Minute)
			h.ok(ExpireCmd{LeaderSince: baseTime})
		}, ack1, "superseded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.submit(NewJob{ID: "j", Queue: "q", Kind: "k", Backoff: Backoff{Base: time.Nanosecond}})
			var tk tokens
			tk.t1 = h.claim1("q", time.Minute).Lease.Token
			c.setup(h, &tk)
			cmd := c.cmd(tk)
			if c.ended == "" {
				j := h.repeat(cmd)
				if !j.EndedBy(cmd) && cmd.Type() != CmdExtend {
					t.Fatalf("Job.EndedBy(%+v) is false for the repeat Apply accepted (last lease %+v)", cmd, j.LastLease)
				}
				return
			}
			r := h.refused(cmd, ErrStaleLease)
			want := "lease " + strconv.FormatUint(tk.t1, 10) + " ended: " + c.ended
			if !strings.Contains(r.Detail, want) {
				t.Fatalf("detail %q does not say %q", r.Detail, want)
			}
			for _, s := range repeatSecrets {
				if strings.Contains(r.Detail, s) {
					t.Fatalf("detail %q quotes request bytes %q", r.Detail, s)
				}
			}
			if j, ok := h.m.Get("j"); ok && j.EndedBy(cmd) {
				t.Fatalf("Job.EndedBy(%+v) is true for a request Apply refused (last lease %+v)", cmd, j.LastLease)
			}
		})
	}
}

// Two different acks of one lease in one entry (a batch, as the
// controller's coalescing makes them): the first wins, the second is
// refused stale and the job keeps the first's result; the same holds with
// the order swapped. Identical acks both succeed.
func TestConcurrentAcksInOneBatch(t *testing.T) {
	for _, order := range [][2]string{{"RESULT-ONE", "RESULT-TWO"}, {"RESULT-TWO", "RESULT-ONE"}, {"RESULT-ONE", "RESULT-ONE"}} {
		h := newHarness(t)
		h.submit(NewJob{ID: "j", Queue: "q", Kind: "k"})
		tok := h.claim1("q", time.Minute).Lease.Token
		r := h.ok(BatchCmd{Cmds: []Command{
			&AckCmd{ID: "j", Token: tok, Result: []byte(order[0])},
			&AckCmd{ID: "j", Token: tok, Result: []byte(order[1])},
		}})
		if err := r.Batch[0].Err(); err != nil || !r.Batch[0].Changed {
			t.Fatalf("%v: first ack: %v changed %v", order, err, r.Batch[0].Changed)
		}
		second := r.Batch[1].Err()
		if order[0] == order[1] {
			if second != nil || r.Batch[1].Changed {
				t.Fatalf("%v: identical second ack: %v changed %v, want a repeat", order, second, r.Batch[1].Changed)
			}
		} else if !strings.Contains(r.Batch[1].Detail, "ended: acked") || !errors.Is(second, ErrStaleLease) {
			t.Fatalf("%v: different second ack: %v, want stale naming acked", order, second)
		}
		if j, _ := h.m.Get("j"); string(j.Result) != order[0] {
			t.Fatalf("%v: job result %q, want the first ack's", order, j.Result)
		}
	}
}

// testdata/snapshot-v4.bin was written by the build before request sums
// (snapshot version 4), from five jobs: "acked" (token 2, result
// RESULT-OLD), "naked" (token 3, delay 1h, error ERR-OLD), "termed"
// (token 4, reason REASON-OLD), "expired" (token 5) and "pending"; applied
// index 9. It still restores, to the digest that build reported; the ack's
// repeat is still told from another ack (by the job's result), while the
// nak's and term's ends have no sum: their repeats cannot be shown to be
// the same request and are refused stale, saying so. A new end records its
// sum, and the state persists as version 5.
func TestRestoreSnapshotV4(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-v4.bin")
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(old[8:]); v != snapV4 {
		t.Fatalf("testdata snapshot is version %d, want 4", v)
	}
	m := New()
	if err := m.Restore(bytes.NewReader(old)); err != nil {
		t.Fatalf("restore of a version 4 snapshot: %v", err)
	}
	const oldDigest = "0e5f37cda845970d2bdbcdf3bf19af9b4ba5ffebf4d14f335131dbb71dbe2d5b"
	if got := fmt.Sprintf("%x", m.Digest().Sum); got != oldDigest || m.AppliedIndex() != 9 {
		t.Fatalf("restored digest %s at index %d, want the old build's %s at 9", got, m.AppliedIndex(), oldDigest)
	}
	for id, want := range map[string]LeaseEnd{"acked": {Token: 2, By: EndAcked}, "naked": {Token: 3, By: EndNaked},
		"termed": {Token: 4, By: EndTermed}, "expired": {Token: 5, By: EndExpired}} {
		if j, ok := m.Get(id); !ok || j.LastLease == nil || *j.LastLease != want {
			t.Fatalf("%s: last lease %+v, want %+v (no sum)", id, j.LastLease, want)
		}
	}
	h := &harness{t: t, m: m, index: 9, term: 1, now: baseTime.Add(2 * time.Minute)}
	h.repeat(AckCmd{ID: "acked", Token: 2, Result: []byte("RESULT-OLD")})
	h.refused(AckCmd{ID: "acked", Token: 2, Result: []byte("RESULT-NEW")}, ErrStaleLease)
	for _, c := range []Command{NakCmd{ID: "naked", Token: 3, Delay: time.Hour, Error: "ERR-OLD"}, TermCmd{ID: "termed", Token: 4, Reason: "REASON-OLD"}} {
		if d := h.refused(c, ErrStaleLease).Detail; !strings.Contains(d, "not recorded") || strings.Contains(d, "OLD") {
			t.Fatalf("%s repeated on an end without a sum: %q, want a refusal saying the request was not recorded", c.Type(), d)
		}
	}
	// A new lease of the pending job ends with its sum recorded.
	tok := h.claim1("q-pending", time.Minute).Lease.Token
	lastLease(t, h.ok(NakCmd{ID: "pending", Token: tok, Error: "e"}).Jobs[0], tok, EndNaked)
	h.repeat(NakCmd{ID: "pending", Token: tok, Error: "e"})

	var buf bytes.Buffer
	snap, _ := m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(buf.Bytes()[8:]); v != snapVersion {
		t.Fatalf("persisted as version %d, want %d", v, snapVersion)
	}
	again := New()
	if err := again.Restore(&buf); err != nil || again.Digest() != m.Digest() {
		t.Fatalf("version 5 round trip: %v, digest equal %v", err, again.Digest() == m.Digest())
	}
}

// A snapshot of version 4 or older whose records carry a request sum
// (flag 16, new in version 5) is corrupt.
func TestSnapshotBeforeV5WithSumIsCorrupt(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	tok := h.claim1("q", time.Minute).Lease.Token
	h.ok(TermCmd{ID: "a", Token: tok, Reason: "r"})
	var buf bytes.Buffer
	snap, _ := h.m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := New().Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("version %d: %v", snapVersion, err)
	}
	for _, v := range []uint16{snapV4, snapV3, snapV2} {
		if err := New().Restore(bytes.NewReader(setSnapVersion(h.m, buf.Bytes(), v))); !IsCorrupt(err) {
			t.Fatalf("version %d snapshot with a request sum: %v, want corrupt", v, err)
		}
	}
}
