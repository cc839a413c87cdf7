package fsm

import (
	"fmt"
	"testing"
	"time"
)

// Apply encodes every result into one buffer of the right size
// (resultSizeHint): never grown while written, so its capacity is the
// size class of its length (for a batch, of at most 4 bytes more per
// command).
func TestApplyResultBufferIsSizedOnce(t *testing.T) {
	m := New()
	var index uint64
	apply := func(what string, at time.Time, c Command, batch int) Result {
		t.Helper()
		index++
		// Not validated: the refused job reaches Apply.
		out := m.Apply(Entry{Index: index, Term: 2, Time: at, Cmd: appendCommand(nil, normalize(c))})
		if want := sizeClass(len(out) + 4*batch); cap(out) > want {
			t.Fatalf("%s: %d bytes in a buffer of %d (want at most %d)", what, len(out), cap(out), want)
		}
		r, err := DecodeResult(out)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return r
	}
	payload := make([]byte, 256)
	for _, n := range []int{1, 16, 200} {
		var jobs []NewJob
		for i := range n {
			jobs = append(jobs, NewJob{ID: fmt.Sprintf("j%d-%d", n, i), Queue: "q", Kind: "k", Payload: payload, Priority: int32(i%5 - 2),
				IdempotencyKey: fmt.Sprint("key", n, i)})
		}
		jobs = append(jobs, NewJob{ID: fmt.Sprint("later", n), Queue: "q2", Kind: "k", RunAt: baseTime.Add(time.Hour)},
			NewJob{ID: "j1-0", Queue: "q", Kind: "k"}, // a duplicate
			NewJob{ID: "bad", Kind: "k"})              // refused: no queue
		apply(fmt.Sprint("submit of ", len(jobs)), baseTime, &SubmitCmd{Jobs: jobs}, 0)
	}
	c := apply("claim", baseTime, &ClaimCmd{Queues: []string{"q"}, Worker: "worker-1", Max: 8, TTL: time.Minute}, 0)
	apply("claim with an ID", baseTime, &ClaimCmd{Queues: []string{"q"}, Worker: "w2", Max: 3, TTL: time.Minute, ID: "claim-1"}, 0)
	js := c.Jobs
	apply("extend", baseTime, &ExtendCmd{ID: js[0].ID, Token: js[0].Lease.Token, TTL: 2 * time.Minute}, 0)
	apply("ack", baseTime, &AckCmd{ID: js[0].ID, Token: js[0].Lease.Token, Result: []byte("a result")}, 0)
	apply("ack again", baseTime, &AckCmd{ID: js[0].ID, Token: js[0].Lease.Token, Result: []byte("a result")}, 0)
	apply("nak", baseTime, &NakCmd{ID: js[1].ID, Token: js[1].Lease.Token, Delay: time.Second, Error: "an error"}, 0)
	apply("term", baseTime, &TermCmd{ID: js[2].ID, Token: js[2].Lease.Token, Reason: "a reason"}, 0)
	apply("cancel", baseTime, &CancelCmd{ID: js[3].ID, Reason: "why"}, 0)
	apply("retry", baseTime, &RetryCmd{ID: js[3].ID}, 0)
	apply("refused ack", baseTime, &AckCmd{ID: "nope", Token: 1}, 0)
	apply("expire", baseTime.Add(time.Hour), &ExpireCmd{LeaderSince: baseTime, Term: 2}, 0)
	apply("pause", baseTime, &PauseCmd{Queue: "q"}, 0)
	apply("resume", baseTime, &ResumeCmd{Queue: "q"}, 0)
	c = apply("claim again", baseTime.Add(time.Hour), &ClaimCmd{Queues: []string{"q"}, Worker: "w3", Max: 4, TTL: time.Minute}, 0)
	batch := &BatchCmd{Cmds: []Command{&ClaimCmd{Queues: []string{"q"}, Worker: "w4", Max: 2, TTL: time.Minute}}}
	for _, j := range c.Jobs {
		batch.Cmds = append(batch.Cmds, &AckCmd{ID: j.ID, Token: j.Lease.Token})
	}
	apply("batch", baseTime.Add(time.Hour), batch, len(batch.Cmds))
	apply("sweep", baseTime.Add(48*time.Hour), &SweepCmd{MaxAge: time.Hour}, 0)
}

// sizeClass is the capacity the allocator gives a byte slice of n bytes.
func sizeClass(n int) int { return cap(append([]byte(nil), make([]byte, n)...)) }

// jobSize is the length of appendJob's encoding, for records with and
// without lease, claim ID, outcome and last lease end, with and without
// payload, small and large field values.
func TestJobSizeIsEncodedLength(t *testing.T) {
	bo := Backoff{Base: time.Second, Max: time.Hour, Factor: 2000, Jitter: 3}
	big := Backoff{Base: -1 << 40, Max: 1 << 50, Factor: 1 << 31, Jitter: 255}
	c := testClass("q", "k", bo, 0)
	for _, j := range []*job{
		{id: "a", cls: c},
		{id: string(make([]byte, 200)), cls: testClass("queue", "kind", big, 1000), key: "key", payload: string(make([]byte, 300)), prio: -70,
			attempts: 999, state: StateRunning, runAt: -5, created: 1 << 62, updated: 1 << 61, seq: 1 << 40,
			lease: &lease{token: 1 << 50, worker: "worker", deadline: 1 << 60, ttl: int64(time.Minute), term: 7, claim: "claim-1"}},
		{id: "b", cls: c, state: StateRunning, lease: &lease{token: 3, worker: "w"}},
		{id: "c", cls: c, state: StateSucceeded, out: &outcome{lastErr: "e", result: make([]byte, 129)},
			end: &leaseEnd{token: 300, by: EndAcked}},
		{id: "d", cls: c, state: StateDead, out: &outcome{}, end: &leaseEnd{token: 1, by: EndTermed}},
		{id: "e", cls: c, state: StateScheduled, end: &leaseEnd{token: 1 << 40, sum: 1 << 63, by: EndNaked}},
	} {
		for _, wp := range []bool{false, true} {
			if got, want := jobSize(j, wp), len(appendJob(nil, j, wp)); got != want {
				t.Errorf("job %.8q (payload %v): jobSize %d, encoding %d bytes", j.id, wp, got, want)
			}
		}
	}
}

// Decoding a record for a result (decodePublic) allocates nothing when its
// strings fit the decoder's arena and it has no lease or outcome: neither
// a record nor a class.
func TestDecodePublicAllocatesNoRecord(t *testing.T) {
	j := &job{id: "an-id", cls: testClass("q", "k", Backoff{Base: time.Second, Max: time.Hour, Factor: 2000, Jitter: 3}, 0), key: "key",
		payload: "pay", state: StatePending, seq: 9}
	enc := appendJob(nil, j, true)
	arena := make([]byte, 0, 4096)
	var got Job
	allocs := testing.AllocsPerRun(100, func() {
		d := decoder{b: enc, pooled: true, arena: arena[:0], noPayload: true}
		got = decodePublic(&d, false)
	})
	if got.ID != j.id || got.Backoff != j.cls.bo || got.Seq != 9 || got.Payload != nil {
		t.Fatalf("decoded %+v", got)
	}
	if allocs != 0 {
		t.Fatalf("%.0f allocations per decoded record, want 0", allocs)
	}
}

// A leased record decodes with one allocation: the caller's Lease (no
// record lease on the way), its claim ID included.
func TestDecodePublicLeasedAllocatesOnlyItsLease(t *testing.T) {
	j := &job{id: "an-id", cls: testClass("q", "k", Backoff{Base: time.Second, Max: time.Hour, Factor: 2000}, 0), state: StateRunning, seq: 9,
		lease: &lease{token: 7, worker: "w", deadline: 5, ttl: int64(time.Minute), term: 2, claim: "c1"}}
	enc := appendJob(nil, j, false)
	arena := make([]byte, 0, 4096)
	var got Job
	allocs := testing.AllocsPerRun(100, func() {
		d := decoder{b: enc, pooled: true, arena: arena[:0]}
		got = decodePublic(&d, false)
	})
	if got.Lease == nil || *got.Lease != (Lease{Token: 7, Worker: "w", Deadline: fromNanos(5), TTL: time.Minute, Term: 2, ClaimID: "c1"}) {
		t.Fatalf("decoded lease %+v", got.Lease)
	}
	if allocs != 1 {
		t.Fatalf("%.0f allocations per decoded leased record, want 1", allocs)
	}
}
