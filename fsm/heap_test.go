package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// backlogJobs is the number of pending jobs BenchmarkHeapPerPendingJob
// holds.
const backlogJobs = 200_000

// fillBacklog applies n jobs of make bench-scale's backlog mix to m, in
// entries of 1024 jobs: client IDs ("p" and nine digits), one queue and
// one kind, 256-byte payloads, priorities 0..3 in turn, every tenth job
// delayed two days (scheduled). The jobs are pending or scheduled.
func fillBacklog(m *Jobs, n int) {
	const perEntry = 1024
	payload := bytes.Repeat([]byte{'p'}, 256)
	jobs := make([]NewJob, 0, perEntry)
	var index uint64
	for i := 0; i < n; {
		jobs = jobs[:0]
		for ; i < n && len(jobs) < perEntry; i++ {
			nj := NewJob{ID: fmt.Sprintf("p%09d", i), Queue: "backlog", Kind: "work", Payload: payload, Priority: int32(i % 4)}
			if i%10 == 9 {
				nj.RunAt = baseTime.Add(48 * time.Hour)
			}
			jobs = append(jobs, nj)
		}
		cmd, err := EncodeCommand(&SubmitCmd{Jobs: jobs})
		if err != nil {
			panic(err)
		}
		index++
		m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: cmd})
	}
}

// BenchmarkHeapPerPendingJob reports the live heap (after GC) one job of
// the backlog mix (fillBacklog) costs beyond its 256-byte payload, with
// 200k held: what docs/bench.md's memory goal (≤ 300 B) counts, for the
// state machine alone (make bench-scale measures a whole member, its
// watch history and GC slack included).
func BenchmarkHeapPerPendingJob(b *testing.B) {
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		m := New()
		fillBacklog(m, backlogJobs)
		after := heapInUse()
		if got := m.Len(); got != backlogJobs {
			b.Fatalf("%d jobs held, want %d", got, backlogJobs)
		}
		b.ReportMetric(float64(after-before)/backlogJobs-256, "B/job")
		runtime.KeepAlive(m)
	}
}
