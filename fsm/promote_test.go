package fsm

import (
	"fmt"
	"testing"
	"time"
)

// promote skips its scan of every queue while no scheduled job can be due
// (state.promo): a job that becomes scheduled after a scan, due before
// every job that scan saw, is still promoted on time, whether submitted
// delayed (insert) or nakked with a delay (replace). Checked to fail with
// either lowering of the bound removed.
func TestPromoteSeesJobsScheduledAfterItsScan(t *testing.T) {
	h := newHarness(t)
	t0 := h.now
	h.submit(NewJob{ID: "late", Queue: "a", Kind: "k", RunAt: t0.Add(time.Hour)})
	h.submit(NewJob{ID: "x", Queue: "b", Kind: "k"})
	x := h.claim1("b", time.Minute) // the scan: nothing due before t0+1h
	h.ok(NakCmd{ID: x.ID, Token: x.Lease.Token, Delay: time.Minute})
	h.now = t0.Add(2 * time.Minute)
	if got := h.claim1("b", time.Minute); got.ID != "x" || got.Attempts != 2 {
		t.Fatalf("after the nak's delay: claimed %s (attempt %d), want x's second attempt", got.ID, got.Attempts)
	}
	h.submit(NewJob{ID: "y", Queue: "c", Kind: "k", RunAt: t0.Add(3 * time.Minute)})
	h.now = t0.Add(4 * time.Minute)
	if got := h.claim1("c", time.Minute); got.ID != "y" {
		t.Fatalf("after its run-at: claimed %s, want y", got.ID)
	}
	if r := h.ok(ClaimCmd{Queues: []string{"a"}, Worker: "w", Max: 1, TTL: time.Minute}); len(r.Jobs) != 0 {
		t.Fatalf("late claimed before its run-at: %+v", r.Jobs)
	}
	h.now = t0.Add(time.Hour)
	if got := h.claim1("a", time.Minute); got.ID != "late" {
		t.Fatalf("at its run-at: claimed %s, want late", got.ID)
	}
}

// BenchmarkApplyClaimManyQueues: claims on one queue among 10,000 that
// hold a few jobs each, one scheduled, each claim at a later time (as
// every entry is): the cost of a claim against the number of queues.
func BenchmarkApplyClaimManyQueues(b *testing.B) {
	for _, queues := range []int{1, 10_000} {
		b.Run(fmt.Sprint(queues, "-queues"), func(b *testing.B) {
			m := New()
			var index uint64
			apply := func(at time.Time, c Command) {
				index++
				cmd, err := EncodeCommand(c)
				if err != nil {
					b.Fatal(err)
				}
				m.Apply(Entry{Index: index, Term: 1, Time: at, Cmd: cmd})
			}
			for q := range queues {
				jobs := make([]NewJob, 3)
				for i := range jobs {
					jobs[i] = NewJob{Queue: fmt.Sprintf("q%05d", q), Kind: "k", Payload: make([]byte, 256)}
				}
				jobs[2].RunAt = baseTime.Add(24 * time.Hour)
				apply(baseTime, &SubmitCmd{Jobs: jobs})
			}
			fill(m, &index, b.N, 256)
			claim := &ClaimCmd{Queues: []string{"default"}, Worker: "w", Max: 1, TTL: time.Minute}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				apply(baseTime.Add(time.Duration(i+1)*time.Microsecond), claim)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
		})
	}
}
