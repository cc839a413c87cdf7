package jobraft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHandoffClaims runs the hand-off cycle on one member: 64
// submitters each Submit a job and Wait for it, 64 workers each long-poll
// Claim(Max=1) and Ack. It reports the waiting claims' proposals that came
// back empty per job (a submit that woke every waiting claim left all but
// one of them empty) and the log entries per cycle.
func BenchmarkHandoffClaims(b *testing.B) {
	c := openSolo(b)
	const n = 64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var workers sync.WaitGroup
	for i := range n {
		workers.Add(1)
		go func() {
			defer workers.Done()
			req := ClaimRequest{Queues: []string{"h"}, Worker: fmt.Sprint("w", i), Max: 1, Wait: 10 * time.Second}
			for ctx.Err() == nil {
				ls, _ := c.Claim(ctx, req)
				for _, l := range ls {
					_ = l.Ack(ctx, nil)
				}
			}
		}()
	}
	empty, first := c.emptyClaims.Load(), c.node.Status().LastIndex
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var subs sync.WaitGroup
	for range n {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for left.Add(-1) >= 0 {
				j, err := c.Submit(ctx, SubmitRequest{Queue: "h", Kind: "k"})
				if err == nil {
					_, err = c.Wait(ctx, j.ID)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	subs.Wait()
	b.StopTimer()
	b.ReportMetric(float64(c.emptyClaims.Load()-empty)/float64(b.N), "empty/job")
	b.ReportMetric(float64(c.node.Status().LastIndex-first)/float64(b.N), "entries/cycle")
	cancel()
	workers.Wait()
}
