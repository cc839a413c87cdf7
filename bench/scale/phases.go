package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/jobraft/jobraft"
)

// config is one invocation.
type config struct {
	Sizes    []int
	Clients  int
	Warm, D  time.Duration
	Payload  int
	Queues   int // the many-queues scenario: queues, PerQueue jobs each
	PerQueue int
	Kinds    int // the many-kinds scenario: kinds, PerKind jobs each
	PerKind  int
	Dir      string // where the clusters' data dirs go
	Profile  string // a directory: CPU profiles of every phase, heap profiles
	// NoProgressRounds is the catch-up policy's (0: its default).
	NoProgressRounds int
	// Members is the cluster's size: 3, or 1 (a backlog too large for
	// three members' states in this machine's memory: one member's
	// figures, each against the empty backlog's on one member).
	Members int
}

// sizeResult is everything measured at one backlog size.
type sizeResult struct {
	N            int
	Preload      time.Duration
	Submit       result
	Cycle        result
	Jobs         int     // jobs held when memory was measured
	MemberHeap   uint64  // one member's heap after GC (closed: the heap it freed)
	PerJob       float64 // MemberHeap per job beyond the payload (bytes)
	Snapshot     phase   // the leader's: persisted, the log compacted
	SnapshotSize int64
	RestartOpen  time.Duration // Open of a closed member (snapshot restore)
	Restart      phase         // until it applied the leader's commit index
	Backup       phase
	BackupSize   int64
	BackupHeap   uint64 // peak heap growth while the backup ran (garbage included)
	BackupLive   uint64 // peak growth of the heap a GC found live while it ran
	Restore      phase
	DiskRate     float64 // bytes/s: a file of the snapshot's size written and fsynced
	InstallRate  float64 // bytes/s: the new member's snapshot install (the stream, then its seal and restore)
	StreamRate   float64 // bytes/s: the new member's snapshot stream (to its last byte)
	Promoted     phase   // the add until the leader promoted it
	JoinErr      string  // why the add failed (then Promoted is how long it tried)
	LoadTarget   float64 // submits/s during the add: half the Submit rate
	LoadKept     float64 // submits/s completed during the add
	LoadBefore   float64 // submits/s completed in a window of -d before it
	Skipped      []string
}

// fanoutResult is the many-queues and many-kinds scenarios.
type fanoutResult struct {
	Queues, Kinds result
}

// runner measures with cfg, reporting progress lines.
type runner struct {
	cfg      config
	payload  []byte
	progress func(string)
}

// prof is the CPU profile's path for phase at size n ("" without -profile).
func (r *runner) prof(n int, phase string) string {
	if r.cfg.Profile == "" {
		return ""
	}
	return filepath.Join(r.cfg.Profile, fmt.Sprintf("%s-%s.pprof", sizeName(n), phase))
}

func (r *runner) step(n int, f string, a ...any) {
	r.progress(fmt.Sprintf("[%s] %s", sizeName(n), fmt.Sprintf(f, a...)))
}

// measure runs every phase at backlog size n on a fresh cluster.
func (r *runner) measure(n int) (res sizeResult, err error) {
	res.N = n
	c, err := startCluster(r.cfg.Dir, r.cfg.NoProgressRounds, r.cfg.Members)
	if err != nil {
		return res, err
	}
	defer func() { c.close(); os.RemoveAll(c.dir) }()

	t0 := time.Now()
	last := time.Now()
	err = preload(c, n, backlogJob(r.payload), func(done int) {
		if time.Since(last) > 2*time.Second || done == n {
			last = time.Now()
			r.step(n, "preload %s/%s jobs, %s/s", thousands(float64(done)), thousands(float64(n)), thousands(float64(done)/time.Since(t0).Seconds()))
		}
	})
	if err == nil {
		err = c.waitJobs(n, 10*time.Minute)
	}
	if err != nil {
		return res, fmt.Errorf("preload: %w", err)
	}
	res.Preload = time.Since(t0)
	t1 := time.Now()
	if err := c.settle(10 * time.Minute); err != nil {
		return res, err
	}
	r.step(n, "the preload's snapshots taken in %v", secs(time.Since(t1)))
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return res, err
	}
	if err := r.rates(l, &res); err != nil {
		return res, err
	}

	if res.Snapshot, err = timed(r.prof(n, "snapshot"), func() error { return r.snapshot(c, &res) }); err != nil {
		return res, fmt.Errorf("snapshot: %w", err)
	}
	r.step(n, "snapshot %v, %s MB", res.Snapshot, mb(float64(res.SnapshotSize)))
	if err := r.memory(c, &res); err != nil {
		return res, fmt.Errorf("memory: %w", err)
	}
	r.step(n, "memory: a member holds %s MB after GC for %s jobs: %.0f B per job beyond the payload", mb(float64(res.MemberHeap)), thousands(float64(res.Jobs)), res.PerJob)
	if res.Restart, err = timed(r.prof(n, "restart"), func() error { return r.restart(c, &res) }); err != nil {
		return res, fmt.Errorf("restart: %w", err)
	}
	r.step(n, "restart: Open %v, caught up after %v", secs(res.RestartOpen), res.Restart)
	if r.fits(&res, "backup and restore", 1.5) {
		if err := r.backup(c, &res); err != nil {
			return res, err
		}
		r.step(n, "backup %v (%s MB, heap +%s MB at its peak, +%s MB live), restore %v", res.Backup, mb(float64(res.BackupSize)), mb(float64(res.BackupHeap)), mb(float64(res.BackupLive)), res.Restore)
	}
	if res.DiskRate, err = diskRate(c.dir, max(res.SnapshotSize, 64<<20)); err != nil {
		return res, fmt.Errorf("disk: %w", err)
	}
	r.step(n, "disk: sequential write and fsync %s MB/s", mb(res.DiskRate))
	// A new member in this process holds a second copy of the state while
	// the leader serves half the Submit rate: 1.5 copies of headroom were
	// not enough at 14.75M jobs on one member (the kernel killed the
	// process at 24.3 GB resident during the install).
	if r.fits(&res, "new member", 2.2) {
		if err := r.join(c, &res); err != nil {
			return res, fmt.Errorf("new member: %w", err)
		}
		if res.JoinErr != "" {
			r.step(n, "new member NOT promoted after %v: %s", res.Promoted, res.JoinErr)
		}
		r.step(n, "new member: add returned after %v (snapshot stream %s MB/s, install with the member's restore %s MB/s), load %s/s (%s/s before) of %s/s", res.Promoted, mb(res.StreamRate), mb(res.InstallRate), thousands(res.LoadKept), thousands(res.LoadBefore), thousands(res.LoadTarget))
	}
	return res, nil
}

// rates measures cycles, then Submits, on the leader l.
func (r *runner) rates(l *jobraft.Controller, res *sizeResult) (err error) {
	n, o := res.N, &ops{l: l, payload: r.payload}
	if res.Cycle, err = closedLoop(r.cfg.Clients, r.cfg.Warm, r.cfg.D, r.prof(n, "cycle"), o.backlogCycle); err != nil {
		return fmt.Errorf("cycle: %w", err)
	}
	r.step(n, "cycle  %s/s  p99 %v  claim p50 %v p99 %v  CPU %v  failed %d", thousands(res.Cycle.Rate), ms(res.Cycle.P99), ms(res.Cycle.ClaimP50), ms(res.Cycle.ClaimP99), us(res.Cycle.CPU), res.Cycle.Errors)
	r.step(n, "       %s", res.Cycle.Wal)
	if res.Submit, err = closedLoop(r.cfg.Clients, r.cfg.Warm, r.cfg.D, r.prof(n, "submit"), o.submit); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	r.step(n, "Submit %s/s  p99 %v  CPU %v  failed %d", thousands(res.Submit.Rate), ms(res.Submit.P99), us(res.Submit.CPU), res.Submit.Errors)
	r.step(n, "       %s", res.Submit.Wal)
	return nil
}

// again measures the empty backlog's rates once more on a fresh cluster
// (the end of a run: how far the machine drifted meanwhile).
func (r *runner) again() (res sizeResult, err error) {
	c, err := startCluster(r.cfg.Dir, r.cfg.NoProgressRounds, r.cfg.Members)
	if err != nil {
		return res, err
	}
	defer func() { c.close(); os.RemoveAll(c.dir) }()
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return res, err
	}
	return res, r.rates(l, &res)
}

// fits reports whether a phase that holds about k more copies of one
// member's state fits in the memory available now; if not it is recorded
// as skipped.
func (r *runner) fits(res *sizeResult, phase string, k float64) bool {
	need := uint64(k * float64(res.MemberHeap))
	debug.FreeOSMemory()
	avail := memAvailable()
	if avail == 0 || need < avail {
		return true
	}
	res.Skipped = append(res.Skipped, fmt.Sprintf("%s: needs about %s MB, %s MB available", phase, mb(float64(need)), mb(float64(avail))))
	r.step(res.N, "skipped %s", res.Skipped[len(res.Skipped)-1])
	return false
}

// snapshot takes a snapshot on the leader and times it (its persisting
// and the log's compaction).
func (r *runner) snapshot(c *cluster, res *sizeResult) error {
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return err
	}
	// A cluster that ran a while holds a short log (its snapshots long
	// since compacted it), so a new member installs a snapshot; the
	// preload's large entries would all still be in the log: this
	// snapshot compacts the leader's log to its last 64 entries.
	if err := shortLog(l); err != nil {
		return err
	}
	f := l.Node().Raft().Snapshot()
	if err := f.Error(); err != nil {
		return err
	}
	meta, rc, err := f.Open()
	if err != nil {
		return err
	}
	res.SnapshotSize = meta.Size
	return rc.Close()
}

// shortLog sets l's TrailingLogs to 64: its next snapshot compacts its log
// to its last 64 entries.
func shortLog(l *jobraft.Controller) error {
	rcfg := l.Node().Raft().ReloadableConfig()
	rcfg.TrailingLogs = 64
	return l.Node().Raft().ReloadConfig(rcfg)
}

// compactLog compacts l's log to its last 64 entries (a snapshot).
func compactLog(l *jobraft.Controller) error {
	if err := shortLog(l); err != nil {
		return err
	}
	return l.Node().Raft().Snapshot().Error()
}

// memory measures one follower's heap (the only member's, alone): the
// heap after GC with it open, less the heap after GC once it is closed.
// It leaves it closed.
func (r *runner) memory(c *cluster, res *sizeResult) error {
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return err
	}
	f := c.follower()
	if f < 0 {
		f = 0 // the leader alone
	}
	// The follower holds what the leader holds.
	if err := waitUntil(time.Minute, func() bool {
		return c.ctls[f].Node().AppliedIndex() >= l.Node().AppliedIndex()
	}); err != nil {
		return err
	}
	res.Jobs = c.ctls[f].LocalStats().Jobs
	if r.cfg.Profile != "" {
		if err := writeHeapProfile(filepath.Join(r.cfg.Profile, sizeName(res.N)+"-heap.pprof")); err != nil {
			return err
		}
	}
	with := liveHeap()
	if err := c.closeMember(f); err != nil {
		return err
	}
	without := liveHeap()
	if with > without {
		res.MemberHeap = with - without
	}
	if res.Jobs > 0 {
		res.PerJob = float64(res.MemberHeap)/float64(res.Jobs) - float64(r.cfg.Payload)
	}
	return nil
}

// restart opens the closed follower again and times its Open (snapshot
// restore) and its catching up to the leader's commit index (log replay
// and what it missed).
func (r *runner) restart(c *cluster, res *sizeResult) error {
	f := -1
	for i, ctl := range c.ctls {
		if ctl == nil {
			f = i
		}
	}
	target := c.closedAt // alone: what it had applied
	if len(c.ctls) > 1 {
		l, err := c.waitLeader(time.Minute)
		if err != nil {
			return err
		}
		target = l.Node().Status().CommitIndex
	}
	t0 := time.Now()
	if err := c.open(f); err != nil {
		return err
	}
	res.RestartOpen = time.Since(t0)
	return waitUntil(10*time.Minute, func() bool { return c.ctls[f].Node().AppliedIndex() >= target })
}

// backup writes the leader's backup to a file, sampling the heap while it
// runs, then restores it into a fresh data dir.
func (r *runner) backup(c *cluster, res *sizeResult) error {
	l, err := c.waitLeader(time.Minute)
	if err != nil {
		return err
	}
	path := filepath.Join(c.dir, "backup.jrb")
	defer os.Remove(path)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	base := liveHeap()
	stop := samplePeakHeap()
	res.Backup, err = timed(r.prof(res.N, "backup"), func() error {
		_, err := l.Backup(context.Background(), f, jobraft.BackupOptions{TempDir: c.dir})
		if err == nil {
			err = f.Sync()
		}
		return err
	})
	peak, live := stop()
	if peak > base {
		res.BackupHeap = peak - base
	}
	if live > base {
		res.BackupLive = live - base
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if st, err := os.Stat(path); err == nil {
		res.BackupSize = st.Size()
	}
	dir := filepath.Join(c.dir, "restored")
	defer os.RemoveAll(dir)
	res.Restore, err = timed(r.prof(res.N, "restore"), func() error {
		_, err := jobraft.Restore(path, dir, c.members)
		return err
	})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// liveHeap is the heap after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
