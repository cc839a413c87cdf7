package fsm

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"
)

// repeat applies c, which must be a repeat: OK, Changed false, the job as
// it was, and nothing changed but the applied index.
func (h *harness) repeat(c Command) Job {
	h.t.Helper()
	before := h.m.stateSum()
	r := h.ok(c)
	if r.Changed || len(r.Jobs) != 1 {
		h.t.Fatalf("%s repeated: changed=%v jobs=%d, want an unchanged answer", c.Type(), r.Changed, len(r.Jobs))
	}
	if h.m.stateSum() != before {
		h.t.Fatalf("%s repeated: the state changed", c.Type())
	}
	return r.Jobs[0]
}

func lastLease(t *testing.T, j Job, token uint64, by EndKind) {
	t.Helper()
	if j.LastLease == nil || j.LastLease.Token != token || j.LastLease.By != by {
		t.Fatalf("job %s last lease %+v, want %s by token %d", j.ID, j.LastLease, by, token)
	}
	if summed := by == EndNaked || by == EndTermed; summed != (j.LastLease.Sum != 0) {
		t.Fatalf("job %s last lease %+v: a request sum is kept for naks and terms only, always", j.ID, j.LastLease)
	}
}

// Ack, nak and term repeated under the token that ended the lease, as the
// very request that ended it, answer success and change nothing; every
// other use of an ended token is stale.
func TestFinishIdempotentPerToken(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k", Backoff: Backoff{Base: time.Nanosecond}})
	t1 := h.claim1("q", time.Minute).Lease.Token
	r := h.ok(NakCmd{ID: "a", Token: t1, Error: "boom"})
	if !r.Changed {
		t.Fatal("nak: Changed false")
	}
	lastLease(t, r.Jobs[0], t1, EndNaked)
	if r.Jobs[0].LastLease.Sum != (NakCmd{Error: "boom"}).Sum() {
		t.Fatalf("nak's lease end sum %x, want the nak's %x", r.Jobs[0].LastLease.Sum, (NakCmd{Error: "boom"}).Sum())
	}
	if j := h.repeat(NakCmd{ID: "a", Token: t1, Error: "boom"}); j.LastError != "boom" {
		t.Fatalf("repeated nak changed the error: %q", j.LastError)
	}
	h.refused(NakCmd{ID: "a", Token: t1, Error: "other"}, ErrStaleLease) // another nak
	h.refused(AckCmd{ID: "a", Token: t1}, ErrStaleLease)                 // it ended by a nak
	h.refused(TermCmd{ID: "a", Token: t1}, ErrStaleLease)                // likewise
	h.refused(ExtendCmd{ID: "a", Token: t1}, ErrStaleLease)

	// A new lease runs: the last ended one is still t1's.
	h.now = h.now.Add(time.Second)
	t2 := h.claim1("q", time.Minute).Lease.Token
	lastLease(t, h.repeat(NakCmd{ID: "a", Token: t1, Error: "boom"}), t1, EndNaked)
	r = h.ok(AckCmd{ID: "a", Token: t2, Result: []byte("done")})
	if !r.Changed || r.Jobs[0].State != StateSucceeded {
		t.Fatalf("ack %+v", r)
	}
	lastLease(t, r.Jobs[0], t2, EndAcked)
	if j := h.repeat(AckCmd{ID: "a", Token: t2, Result: []byte("done")}); string(j.Result) != "done" || j.State != StateSucceeded {
		t.Fatalf("repeated ack: %+v", j)
	}
	h.refused(AckCmd{ID: "a", Token: t2, Result: []byte("again")}, ErrStaleLease)
	// t1's lease is no longer the last one that ended: fenced.
	h.refused(NakCmd{ID: "a", Token: t1, Error: "boom"}, ErrStaleLease)
	h.refused(AckCmd{ID: "a", Token: t1}, ErrStaleLease)
	h.refused(NakCmd{ID: "a", Token: t2}, ErrStaleLease)
	h.refused(AckCmd{ID: "a", Token: t2 + 1}, ErrStaleLease)
	h.refused(AckCmd{ID: "nope", Token: t2}, ErrNotFound)

	// Term, repeated; then retried and reclaimed, the term still repeats
	// while its lease is the last that ended.
	h.submit(NewJob{ID: "b", Queue: "r", Kind: "k"})
	t3 := h.claim1("r", time.Minute).Lease.Token
	r = h.ok(TermCmd{ID: "b", Token: t3, Reason: "bad"})
	lastLease(t, r.Jobs[0], t3, EndTermed)
	h.repeat(TermCmd{ID: "b", Token: t3, Reason: "bad"})
	h.ok(RetryCmd{ID: "b"})
	h.repeat(TermCmd{ID: "b", Token: t3, Reason: "bad"})
	h.refused(TermCmd{ID: "b", Token: t3}, ErrStaleLease) // another reason
	t4 := h.claim1("r", time.Minute).Lease.Token

	// Cancel of the running job ends its lease as canceled: the worker's
	// finish is stale, not a repeat.
	r = h.ok(CancelCmd{ID: "b", Reason: "stop"})
	lastLease(t, r.Jobs[0], t4, EndCanceled)
	for _, c := range []Command{AckCmd{ID: "b", Token: t4}, NakCmd{ID: "b", Token: t4}, TermCmd{ID: "b", Token: t4}, TermCmd{ID: "b", Token: t3, Reason: "bad"}} {
		h.refused(c, ErrStaleLease)
	}
	// Cancel of a job that is not running leaves the record alone.
	h.submit(NewJob{ID: "c", Queue: "s", Kind: "k"})
	if r := h.ok(CancelCmd{ID: "c"}); r.Jobs[0].LastLease != nil {
		t.Fatalf("cancel of a pending job recorded a lease end %+v", r.Jobs[0].LastLease)
	}

	// Expiry ends the lease as expired.
	h.submit(NewJob{ID: "d", Queue: "t", Kind: "k"})
	t5 := h.claim1("t", time.Second).Lease.Token
	h.now = h.now.Add(2 * time.Second)
	if r := h.ok(ExpireCmd{LeaderSince: baseTime}); len(r.Expired) != 1 {
		t.Fatalf("expired %v", r.Expired)
	}
	j, _ := h.m.Get("d")
	lastLease(t, j, t5, EndExpired)
	h.refused(AckCmd{ID: "d", Token: t5}, ErrStaleLease)
	h.refused(NakCmd{ID: "d", Token: t5}, ErrStaleLease)
}

// The last lease end is replicated state: in the digest (two states that
// differ only by it differ) and in snapshots (restored as it was).
func TestLastLeaseInDigestAndSnapshot(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	tok := h.claim1("q", time.Minute).Lease.Token
	h.ok(AckCmd{ID: "a", Token: tok, Result: []byte("r")})

	st := h.m.st
	j := st.get("a")
	other := j.clone()
	other.end = &leaseEnd{token: j.end.token + 1, by: j.end.by}
	if st.hash(j) == st.hash(other) {
		t.Fatal("the job hash ignores the last lease's token")
	}
	other = j.clone()
	other.end = &leaseEnd{token: j.end.token, by: EndNaked}
	if st.hash(j) == st.hash(other) {
		t.Fatal("the job hash ignores how the last lease ended")
	}
	naked := other
	other = naked.clone()
	other.end = &leaseEnd{token: j.end.token, by: EndNaked, sum: 7}
	if st.hash(naked) == st.hash(other) {
		t.Fatal("the job hash ignores the request sum of the last lease end")
	}

	var buf bytes.Buffer
	snap, _ := h.m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(buf.Bytes()[8:]); v != snapVersion {
		t.Fatalf("snapshot version %d, want %d", v, snapVersion)
	}
	r := New()
	if err := r.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Get("a")
	lastLease(t, got, tok, EndAcked)
	if r.Digest() != h.m.Digest() {
		t.Fatal("restored digest differs")
	}
	// The restored state answers the repeat as the original does.
	h2 := &harness{t: t, m: r, index: h.index, term: h.term, now: h.now}
	h2.repeat(AckCmd{ID: "a", Token: tok, Result: []byte("r")})
	h2.refused(AckCmd{ID: "a", Token: tok}, ErrStaleLease)
}

// setSnapVersion rewrites a snapshot of m's state as version v: versions
// before 4 lose the log clock from the header and the digest.
func setSnapVersion(m *Jobs, b []byte, v uint16) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint16(b[8:], v)
	if v < snapV4 {
		const hdr = 8 + 2 + 8 + 8
		b = append(b[:hdr], b[hdr+clockSize:]...)
		m.mu.RLock()
		sum := m.st.digest(false)
		m.mu.RUnlock()
		copy(b[len(b)-4-len(sum):], sum[:])
	}
	n := len(b) - 4
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

// A version 1 snapshot (no lease ends recorded) still restores; one that
// carries a lease end is corrupt.
func TestRestoreSnapshotV1(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	h.submit(NewJob{ID: "b", Queue: "q", Kind: "k"})
	tok := h.claim1("q", time.Minute).Lease.Token
	var buf bytes.Buffer
	snap, _ := h.m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	v1 := setSnapVersion(h.m, buf.Bytes(), 1)
	r := New()
	if err := r.Restore(bytes.NewReader(v1)); err != nil {
		t.Fatalf("restore of a version 1 snapshot: %v", err)
	}
	if r.stateSum() != h.m.stateSum() {
		t.Fatal("version 1 restore: state differs (log clock apart: version 1 has none)")
	}

	h.ok(AckCmd{ID: "a", Token: tok})
	buf.Reset()
	snap, _ = h.m.Snapshot()
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(bytes.NewReader(setSnapVersion(h.m, buf.Bytes(), 1))); !IsCorrupt(err) {
		t.Fatalf("version 1 snapshot with a lease end: %v, want corrupt", err)
	}
	if err := r.Restore(bytes.NewReader(setSnapVersion(h.m, buf.Bytes(), snapVersion+1))); err == nil || IsCorrupt(err) {
		t.Fatalf("version %d snapshot: %v, want ErrSnapshotVersion", snapVersion+1, err)
	}
}

// Results: version 2 carries Changed for ack, nak and term; a version 1
// result (an older leader's) still decodes, as changed.
func TestResultVersions(t *testing.T) {
	m := New()
	h := &harness{t: t, m: m, term: 1, now: baseTime}
	h.submit(NewJob{ID: "a", Queue: "q", Kind: "k"})
	tok := h.claim1("q", time.Minute).Lease.Token
	h.index++
	out := m.Apply(Entry{Index: h.index, Term: 1, Time: h.now, Cmd: appendCommand(nil, normalize(AckCmd{ID: "a", Token: tok}))})
	if out[0] != ResultVersion {
		t.Fatalf("result version %d", out[0])
	}
	r, err := DecodeResult(out)
	if err != nil || !r.Changed || len(r.Jobs) != 1 {
		t.Fatalf("v2: %+v %v", r, err)
	}
	// Version 1: no changed byte, and no lease end in the record.
	m1 := New()
	h1 := &harness{t: t, m: m1, term: 1, now: baseTime}
	h1.submit(NewJob{ID: "x", Queue: "q", Kind: "k"})
	j := m1.st.get("x")
	v1 := []byte{1, byte(CmdAck), byte(CodeOK)}
	v1 = binary.AppendUvarint(v1, 9)
	v1 = appendStr(v1, "")
	v1 = binary.AppendUvarint(v1, 1)
	v1 = appendJob(v1, j, false)
	r, err = DecodeResult(v1)
	if err != nil || !r.Changed || len(r.Jobs) != 1 || r.Jobs[0].ID != "x" {
		t.Fatalf("v1: %+v %v", r, err)
	}
	if _, err := DecodeResult(append([]byte{4}, v1[1:]...)); err == nil {
		t.Fatal("version 4 result decoded")
	}
	bad := append([]byte(nil), out...)
	bad[len(bad)-1] = 2
	if _, err := DecodeResult(bad); err == nil {
		t.Fatal("changed byte 2 decoded")
	}
}
