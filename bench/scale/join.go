package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

// join adds a fourth member while clients submit at half the measured
// Submit rate, and times its promotion by the leader's catch-up policy
// (a snapshot install, then rounds of appends) and its snapshot stream.
// An add the policy gave up on is recorded (JoinErr), not an error.
func (r *runner) join(c *cluster, res *sizeResult) error {
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return err
	}
	// The leader now may not be the one whose log the snapshot phase
	// compacted (a busy process can lose an election): compact this one's
	// too, or the new member replays the preload's entries instead of
	// installing a snapshot. Not measured.
	if err := compactLog(l); err != nil {
		return err
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	m := raft.Member{ID: "m3", Address: addrs[0], Voter: true}
	ctl, err := jobraft.Open(context.Background(), c.memberConfig(m, false, nil))
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = l.Node().RemoveMember(ctx, m.ID)
		_ = ctl.Close(ctx)
	}()

	ctx, cancel := context.WithCancel(context.Background())
	o := &ops{l: l, payload: r.payload}
	res.LoadTarget = res.Submit.Rate / 2
	done, wait := paced(ctx, r.cfg.Clients, res.LoadTarget, o.submit)
	defer func() { cancel(); wait() }()
	pause(ctx, r.cfg.Warm)
	nb, tb := done.Load(), time.Now()
	pause(ctx, r.cfg.D)
	res.LoadBefore = float64(done.Load()-nb) / time.Since(tb).Seconds()

	added := make(chan error, 1)
	n0, t0, cpu0 := done.Load(), time.Now(), cpuTime()
	stop, err := startProfile(r.prof(res.N, "join"))
	if err != nil {
		return err
	}
	go func() { added <- l.Node().AddMember(ctx, m.ID, m.Address) }()
	var start, streamed, end time.Time
	var size, sent uint64
	for finished := false; !finished; {
		select {
		case err = <-added:
			finished = true
		case <-time.After(20 * time.Millisecond):
		}
		// The leader's progress line (whoever leads: a busy process can
		// lose an election meanwhile), refreshed every quarter election
		// timeout: the install runs from the first line showing it (or
		// snapshot bytes sent) to the first that no longer does.
		if p := progressOf(c.leader(), m.ID); p != nil {
			busy := p.Installing || p.SnapshotBytesSent > sent
			size, sent = max(size, p.SnapshotSize, p.SnapshotBytesSent), max(sent, p.SnapshotBytesSent)
			// The stream ends when its last byte was read; the install
			// RPC then waits for the member to seal and restore it. A
			// stream that ended before the first line showed it has no
			// rate (the line is refreshed every quarter election timeout).
			if streamed.IsZero() && !start.IsZero() && size > 0 && sent >= size {
				streamed = time.Now()
			}
			switch {
			case busy && start.IsZero():
				start = time.Now()
				if size > 0 && sent >= size {
					streamed = start
				}
			case !busy && !start.IsZero() && end.IsZero():
				end = time.Now()
			}
		}
	}
	res.Promoted = phase{Wall: time.Since(t0), CPU: cpuTime() - cpu0}
	if perr := stop(); perr != nil {
		return perr
	}
	if err != nil {
		// The catch-up policy's verdict is the figure (a stalled member
		// is named, never promoted).
		res.JoinErr = err.Error()
	}
	res.LoadKept = float64(done.Load()-n0) / res.Promoted.Wall.Seconds()
	if !end.IsZero() && end.After(start) {
		res.InstallRate = float64(size) / end.Sub(start).Seconds()
	}
	if !streamed.IsZero() && streamed.After(start) {
		res.StreamRate = float64(size) / streamed.Sub(start).Seconds()
	}
	return nil
}

// progressOf is the leader's progress line of member id, or nil.
func progressOf(l *jobraft.Controller, id string) *raft.MemberProgress {
	if l == nil {
		return nil
	}
	st := l.Node().Status()
	for i := range st.Progress {
		if st.Progress[i].ID == id {
			return &st.Progress[i]
		}
	}
	return nil
}

// diskRate writes a file of size bytes in dir in 1 MiB writes, fsyncs
// it, and returns the rate (bytes per second, the fsync included).
func diskRate(dir string, size int64) (float64, error) {
	path := filepath.Join(dir, "disk-rate")
	defer os.Remove(path)
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	t0 := time.Now()
	w := bufio.NewWriterSize(f, len(buf))
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := w.Write(buf[:min(int64(len(buf)), size-n)]); err != nil {
			return 0, err
		}
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return float64(size) / time.Since(t0).Seconds(), nil
}

// samplePeakHeap samples the heap every 10 ms until the returned
// function is called, which returns the peaks seen: of the heap's object
// bytes (garbage not yet collected included: with the GC at its default
// pace up to about the live heap again) and of the heap the last GC found
// live (what was retained).
func samplePeakHeap() (stop func() (objects, live uint64)) {
	var peak, peakLive atomic.Uint64
	quit := make(chan struct{})
	finished := make(chan struct{})
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			if v := s[1].Value.Uint64(); v > peakLive.Load() {
				peakLive.Store(v)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		close(quit)
		<-finished
		return peak.Load(), peakLive.Load()
	}
}

// memAvailable is the kernel's estimate of the memory available for new
// work (MemAvailable in /proc/meminfo), 0 when unknown.
func memAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// fanout measures cycles with many queues and with many kinds on a fresh
// cluster: Queues×PerQueue jobs in Queues queues, cycles on a random one;
// Kinds×PerKind jobs of Kinds kinds in one queue, each client submitting
// and claiming (by kind) its own.
func (r *runner) fanout() (out fanoutResult, err error) {
	c, err := startCluster(r.cfg.Dir, r.cfg.NoProgressRounds, r.cfg.Members)
	if err != nil {
		return out, err
	}
	defer func() { c.close(); os.RemoveAll(c.dir) }()
	nq, nk := r.cfg.Queues*r.cfg.PerQueue, r.cfg.Kinds*r.cfg.PerKind
	err = preload(c, nq, func(i uint64) jobraft.SubmitRequest {
		q := int(i) % r.cfg.Queues
		return job(i, fmt.Sprintf("%s-%d", queueName(q), i), queueName(q), backlogKind, r.payload)
	}, func(int) {})
	if err == nil {
		err = preload(c, nk, func(i uint64) jobraft.SubmitRequest {
			return job(i, fmt.Sprint("kinds-", i), "kinds", kindName(int(i)%r.cfg.Kinds), r.payload)
		}, func(int) {})
	}
	if err != nil {
		return out, fmt.Errorf("preload: %w", err)
	}
	r.progress(fmt.Sprintf("[fanout] %d queues × %d jobs, %d kinds × %d jobs preloaded", r.cfg.Queues, r.cfg.PerQueue, r.cfg.Kinds, r.cfg.PerKind))
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return out, err
	}
	o := &ops{l: l, payload: r.payload}
	if out.Queues, err = closedLoop(r.cfg.Clients, r.cfg.Warm, r.cfg.D, r.prof(-1, "queues-cycle"), o.manyQueuesCycle(r.cfg.Queues)); err != nil {
		return out, fmt.Errorf("many queues: %w", err)
	}
	r.progress(fmt.Sprintf("[fanout] %d queues: cycle %s/s, claim p50 %v p99 %v", r.cfg.Queues, thousands(out.Queues.Rate), ms(out.Queues.ClaimP50), ms(out.Queues.ClaimP99)))
	if out.Kinds, err = closedLoop(r.cfg.Clients, r.cfg.Warm, r.cfg.D, r.prof(-1, "kinds-cycle"), o.manyKindsCycle(r.cfg.Kinds)); err != nil {
		return out, fmt.Errorf("many kinds: %w", err)
	}
	r.progress(fmt.Sprintf("[fanout] %d kinds: cycle %s/s, claim p50 %v p99 %v", r.cfg.Kinds, thousands(out.Kinds.Rate), ms(out.Kinds.ClaimP50), ms(out.Kinds.ClaimP99)))
	return out, nil
}
