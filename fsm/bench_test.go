package fsm

import (
	"bytes"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"
)

const benchBatch = 1000

// submitBatch encodes n jobs without IDs (derived from the entry index), so
// one encoding can be applied at any number of indexes.
func submitBatch(n, payload int) []byte {
	jobs := make([]NewJob, n)
	p := bytes.Repeat([]byte{'x'}, payload)
	for i := range jobs {
		jobs[i] = NewJob{Queue: "default", Kind: "email", Payload: p, Priority: int32(i % 3)}
	}
	b, err := EncodeCommand(&SubmitCmd{Jobs: jobs})
	if err != nil {
		panic(err)
	}
	return b
}

// fill applies n pending jobs of the given payload size in batches.
func fill(m *Jobs, index *uint64, n, payload int) {
	cmd := submitBatch(benchBatch, payload)
	for done := 0; done < n; done += benchBatch {
		if n-done < benchBatch {
			cmd = submitBatch(n-done, payload)
		}
		*index++
		m.Apply(Entry{Index: *index, Term: 1, Time: baseTime, Cmd: cmd})
	}
}

func BenchmarkApplySubmit(b *testing.B) {
	cmd := submitBatch(benchBatch, 256)
	m := New()
	var index uint64
	b.SetBytes(int64(len(cmd)) / benchBatch)
	cpu := startCPU(b)
	done := 0
	for ; done < b.N; done += benchBatch {
		index++
		m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: cmd})
	}
	cpu.stop(b, done)
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "submits/s")
}

func BenchmarkApplyClaim(b *testing.B) {
	m := New()
	var index uint64
	fill(m, &index, b.N, 256)
	cmd, _ := EncodeCommand(&ClaimCmd{Queues: []string{"default"}, Worker: "w", Max: 1, TTL: time.Minute})
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		index++
		m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: cmd})
	}
	cpu.stop(b, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

func BenchmarkApplyAck(b *testing.B) {
	m := New()
	var index uint64
	fill(m, &index, b.N, 256)
	acks := make([][]byte, 0, b.N)
	claim, _ := EncodeCommand(&ClaimCmd{Queues: []string{"default"}, Worker: "w", Max: MaxClaim, TTL: time.Minute})
	for len(acks) < b.N {
		index++
		r, _ := DecodeResult(m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: claim}))
		for _, j := range r.Jobs {
			a, _ := EncodeCommand(&AckCmd{ID: j.ID, Token: j.Lease.Token, Result: []byte("ok")})
			acks = append(acks, a)
		}
	}
	cpu := startCPU(b)
	for _, a := range acks {
		index++
		m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: a})
	}
	cpu.stop(b, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acks/s")
}

// cpuMeter measures the process CPU of a benchmark's timed part (a
// fill before it excluded), reported per op as cpu-ns/op: on a shared
// machine wall time (ns/op) counts the other processes' share too.
type cpuMeter struct{ start time.Duration }

// startCPU resets b's timer and starts measuring.
func startCPU(b *testing.B) cpuMeter {
	b.ResetTimer()
	return cpuMeter{processCPU()}
}

// stop reports the CPU per op for ops operations.
func (c cpuMeter) stop(b *testing.B, ops int) {
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-c.start)/float64(max(ops, 1)), "cpu-ns/op")
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

const million = 1_000_000

// BenchmarkMemoryPerPendingJob reports the heap bytes one pending job costs
// beyond its 256-byte payload, with 1M jobs held.
func BenchmarkMemoryPerPendingJob(b *testing.B) {
	if testing.Short() {
		b.Skip("1M jobs")
	}
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		m := New()
		var index uint64
		fill(m, &index, million, 256)
		after := heapInUse()
		b.ReportMetric(float64(after-before)/million-256, "overhead-B/job")
		runtime.KeepAlive(m)
	}
}

func filled1M(b *testing.B) *Jobs {
	m := New()
	var index uint64
	fill(m, &index, million, 256)
	return m
}

func BenchmarkSnapshotPersist1M(b *testing.B) {
	if testing.Short() {
		b.Skip("1M jobs")
	}
	m := filled1M(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Persist(io.Discard); err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
}

// BenchmarkRestore1M restores a snapshot of 1M pending jobs (256 B
// payloads) into an empty state machine, each restore after a GC (as in
// Open, no earlier state is garbage meanwhile). cpu-ns/op is the
// process CPU per restore: on a shared machine the wall time counts the
// other processes' share too. Run with -cpu 1,2 to see the decoders'
// share (snapshot_load.go).
func BenchmarkRestore1M(b *testing.B) {
	if testing.Short() {
		b.Skip("1M jobs")
	}
	m := filled1M(b)
	s, _ := m.Snapshot()
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		b.Fatal(err)
	}
	m, s = nil, nil
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	var cpu time.Duration
	var r *Jobs
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r = nil
		runtime.GC()
		start := processCPU()
		b.StartTimer()
		r = New()
		if err := r.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU() - start
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	runtime.KeepAlive(r)
}

func BenchmarkDigest(b *testing.B) {
	m := New()
	var index uint64
	fill(m, &index, 10000, 16)
	for i := 0; i < 10; i++ {
		m.Apply(Entry{Index: index + 1 + uint64(i), Term: 1, Time: baseTime,
			Cmd: appendCommand(nil, &PauseCmd{Queue: "q" + strconv.Itoa(i)})})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = m.Digest()
	}
}

// BenchmarkApplyCycle: full job cycles at a steady state size (100k jobs
// held): per round, a submit of 64 jobs with client IDs, one claim of 64,
// 64 acks, and a sweep keeping the queue's terminal jobs at 10k. One op is
// one job's cycle (everything a member applies for it).
func BenchmarkApplyCycle(b *testing.B) {
	const round = 64
	m := New()
	var index uint64
	fill(m, &index, 100_000, 256)
	p := bytes.Repeat([]byte{'x'}, 256)
	claim, _ := EncodeCommand(&ClaimCmd{Queues: []string{"cy"}, Worker: "w", Max: round, TTL: time.Minute})
	sweep, _ := EncodeCommand(&SweepCmd{MaxPerQueue: 10_000})
	apply := func(cmd []byte) Result {
		index++
		r, _ := DecodeResult(m.Apply(Entry{Index: index, Term: 1, Time: baseTime, Cmd: cmd}))
		return r
	}
	seq := 0
	b.ReportAllocs()
	cpu := startCPU(b)
	done := 0
	for ; done < b.N; done += round {
		jobs := make([]NewJob, round)
		for i := range jobs {
			seq++
			jobs[i] = NewJob{ID: "01JOBRAFTBENCH" + strconv.Itoa(seq), Queue: "cy", Kind: "k", Payload: p}
		}
		sub, _ := EncodeCommand(&SubmitCmd{Jobs: jobs})
		apply(sub)
		for _, j := range apply(claim).Jobs {
			ack, _ := EncodeCommand(&AckCmd{ID: j.ID, Token: j.Lease.Token})
			apply(ack)
		}
		apply(sweep)
	}
	cpu.stop(b, done)
}
