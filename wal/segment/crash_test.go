package segment_test

// Crash tests with real processes. TestCrashRecovery re-executes this test
// binary as a child (TestCrashChild, selected by an environment variable)
// that writes stamped batches, truncates, compacts and resets a *Log in a
// directory, and reports on stdout every operation before it starts and
// again once it returned nil. The parent SIGKILLs the child at a random
// moment, reopens the log in-process and checks it against a model built
// only from the child's reports: every acknowledged batch is present and
// intact, nothing beyond the last acknowledgement exists except the one
// operation in flight (all of it or none of it), and a torn tail is cut
// once (a second Open changes nothing). The next child resumes from the
// reopened log, so crash → recover → write → crash chains are covered.
//
// Replay a failure with the printed seed:
//
//	go test ./wal/segment/ -run TestCrashRecovery -crash.seed=N -crash.rounds=R -v

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

var (
	crashRounds = flag.Int("crash.rounds", 0, "crash test: SIGKILLs of a child writer (0: 200, 30 with -short)")
	crashSeed   = flag.Uint64("crash.seed", 0, "crash test: seed (0: random, printed)")
)

const (
	crashEnvDir  = "JOBRAFT_WAL_CRASH_DIR"
	crashEnvSeed = "JOBRAFT_WAL_CRASH_SEED"
	crashSegSize = 16 << 10
	crashPrefix  = "crash: "
	// crashMaxSpan bounds the live log of a child; beyond it the child
	// compacts, so chains of kills keep their directories small.
	crashMaxSpan = 1500
)

var crashTermKey = []byte("crash_term")

// crashPayload is the deterministic body of the entry (index, term): 16 B to
// 8 KiB, so the parent can recompute what the child stored.
func crashPayload(index, term uint64) []byte {
	h := index*0x9e3779b97f4a7c15 ^ term*0xc2b2ae3d27d4eb4f
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	n := 16 + int(h%(8192-16+1))
	b := make([]byte, n)
	x := h | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

func crashEntry(index, term uint64) *raft.Log {
	e := &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: crashPayload(index, term)}
	segment.Stamp(e)
	return e
}

// TestCrashChild is the child process of TestCrashRecovery; run directly it
// skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("the child of TestCrashRecovery; runs only when re-executed by it")
	}
	seed, err := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	if err != nil {
		crashFatal("bad seed: %v", err)
	}
	crashChild(dir, seed)
}

// crashSay writes one protocol line straight to the stdout file descriptor
// (no buffering), so a line the parent reads is a thing that happened.
func crashSay(format string, args ...any) {
	if _, err := os.Stdout.WriteString(crashPrefix + fmt.Sprintf(format, args...) + "\n"); err != nil {
		os.Exit(4)
	}
}

func crashFatal(format string, args ...any) {
	crashSay("fatal "+format, args...)
	os.Exit(3)
}

func crashChild(dir string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	l, err := wal.Open(dir, wal.WithSegmentSize(crashSegSize))
	if err != nil {
		crashFatal("open: %v", err)
	}
	var floor atomic.Uint64
	floor.Store(l.Floor())
	l.SetCommitFloor(floor.Load)
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	term := uint64(1)
	if last != 0 {
		var e raft.Log
		if err := l.GetLog(last, &e); err != nil {
			crashFatal("get last %d: %v", last, err)
		}
		term = e.Term
	}
	// Terms never go down, also across a reset that empties the log: like
	// raft's CurrentTerm, the child keeps its term in the stable store.
	if v, err := l.GetUint64(crashTermKey); err == nil {
		term = max(term, v)
	}
	bump := func() {
		term++
		if err := l.SetUint64(crashTermKey, term); err != nil {
			crashFatal("persist term: %v", err)
		}
	}
	crashSay("ready %d %d %d %d", first, last, term, floor.Load())
	next := func() uint64 { // index of the next entry to store
		if last == 0 {
			return floor.Load() + 1
		}
		return last + 1
	}
	for op := 0; op < 5000; op++ {
		f := floor.Load()
		r := rng.IntN(100)
		switch {
		case last != 0 && last-first > crashMaxSpan:
			floor.Store(last)
			m := last - 1 - uint64(rng.IntN(50))
			crashSay("compact %d", m)
			if err := l.DeleteRange(first, m); err != nil {
				crashFatal("compact %d: %v", m, err)
			}
			crashSay("compacted %d", m)
			first = m + 1
		case r < 65 || last == 0:
			if rng.IntN(20) == 0 {
				bump()
			}
			a := next()
			n := 1 + uint64(rng.IntN(64))
			batch := make([]*raft.Log, n)
			for i := range batch {
				batch[i] = crashEntry(a+uint64(i), term)
			}
			crashSay("store %d %d %d %d", a, a+n-1, term, f)
			if err := l.StoreLogs(batch); err != nil {
				crashFatal("store [%d,%d]: %v", a, a+n-1, err)
			}
			crashSay("acked %d", a+n-1)
			if last == 0 {
				first = a
			}
			last = a + n - 1
		case r < 77:
			if f > last {
				continue
			}
			// raft's commit index moves up.
			floor.Store(f + uint64(rng.IntN(int(last-f)+1)))
		case r < 87:
			lo := max(f, first) + 1
			if lo > last {
				continue
			}
			m := lo + uint64(rng.IntN(int(last-lo+1)))
			crashSay("trunc %d", m)
			if err := l.DeleteRange(m, last); err != nil {
				crashFatal("truncate [%d,%d]: %v", m, last, err)
			}
			crashSay("truncated %d", m)
			last = m - 1
			bump() // a new leader's entries replace the cut suffix
		case r < 98:
			hi := min(f, last-1)
			if hi < first {
				continue
			}
			m := first + uint64(rng.IntN(int(hi-first+1)))
			crashSay("compact %d", m)
			if err := l.DeleteRange(first, m); err != nil {
				crashFatal("compact %d: %v", m, err)
			}
			crashSay("compacted %d", m)
			first = m + 1
		default:
			crashSay("reset")
			if err := l.DeleteRange(first, last); err != nil {
				crashFatal("reset [%d,%d]: %v", first, last, err)
			}
			crashSay("resetdone")
			first, last = 0, 0
		}
	}
	crashSay("idle")
	// Wait to be killed; EOF on stdin means the parent is gone.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// crashModel is what the parent knows the log must hold.
type crashModel struct {
	first, last uint64
	terms       map[uint64]uint64 // index → term of every live or compacted-but-intact entry
	floor       uint64            // highest floor reported with an acknowledged batch
	// termsFrom is the lowest index whose term the log's term index must
	// still know (terms.go): the first entry stored since the last reset.
	termsFrom uint64
}

func newCrashModel() *crashModel { return &crashModel{terms: map[uint64]uint64{}} }

func (m *crashModel) clone() *crashModel {
	c := *m
	c.terms = make(map[uint64]uint64, len(m.terms))
	for k, v := range m.terms {
		c.terms[k] = v
	}
	return &c
}

// crashOp is one reported operation.
type crashOp struct {
	kind              string // store, trunc, compact, reset
	a, b, term, floor uint64
}

func (m *crashModel) apply(op crashOp) {
	switch op.kind {
	case "store":
		for i := op.a; i <= op.b; i++ {
			m.terms[i] = op.term
		}
		if m.last == 0 {
			m.first = op.a
			if m.termsFrom == 0 {
				m.termsFrom = op.a
			}
		}
		m.last = op.b
		m.floor = max(m.floor, op.floor)
	case "trunc":
		for i := range m.terms {
			if i >= op.a {
				delete(m.terms, i)
			}
		}
		m.last = op.a - 1
	case "compact":
		m.first = op.a + 1
	case "reset":
		clear(m.terms)
		m.first, m.last, m.termsFrom = 0, 0, 0
	}
}

// crashRun is what one child reported before it was killed.
type crashRun struct {
	ready    []uint64 // first, last, term, floor as the child saw them
	acked    []crashOp
	inflight *crashOp // started, not reported done
	idle     bool
}

func parseCrashLines(lines []string) (crashRun, error) {
	var run crashRun
	nums := func(f []string) ([]uint64, error) {
		out := make([]uint64, len(f))
		for i, s := range f {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, err := nums(f[1:])
		if err != nil && f[0] != "fatal" {
			return run, fmt.Errorf("bad line %q: %v", line, err)
		}
		want := map[string]int{"ready": 4, "store": 4, "acked": 1, "trunc": 1, "truncated": 1,
			"compact": 1, "compacted": 1, "reset": 0, "resetdone": 0, "idle": 0}
		if k, ok := want[f[0]]; !ok || k != len(n) {
			return run, fmt.Errorf("child: %s", line)
		}
		done := func(kind string, a uint64) error {
			if run.inflight == nil || run.inflight.kind != kind || (kind != "reset" && a != run.inflight.b && a != run.inflight.a) {
				return fmt.Errorf("line %q does not finish %+v", line, run.inflight)
			}
			run.acked = append(run.acked, *run.inflight)
			run.inflight = nil
			return nil
		}
		start := func(op crashOp) error {
			if run.inflight != nil {
				return fmt.Errorf("line %q while %+v in flight", line, run.inflight)
			}
			run.inflight = &op
			return nil
		}
		switch f[0] {
		case "ready":
			run.ready = n
		case "store":
			err = start(crashOp{kind: "store", a: n[0], b: n[1], term: n[2], floor: n[3]})
		case "acked":
			err = done("store", n[0])
		case "trunc", "compact":
			err = start(crashOp{kind: f[0], a: n[0], b: n[0]})
		case "truncated":
			err = done("trunc", n[0])
		case "compacted":
			err = done("compact", n[0])
		case "reset":
			err = start(crashOp{kind: "reset"})
		case "resetdone":
			err = done("reset", 0)
		case "idle":
			run.idle = true
		}
		if err != nil {
			return run, err
		}
	}
	if run.ready == nil {
		return run, errors.New("child never reported ready")
	}
	return run, nil
}

type crashStats struct {
	rounds, idle, inflight, inflightPresent, cut, injected int
	kinds                                                  map[string]int
}

func TestCrashRecovery(t *testing.T) {
	if os.Getenv(crashEnvDir) != "" {
		t.Skip("in the child")
	}
	rounds := *crashRounds
	switch {
	case rounds > 0:
	case testing.Short():
		rounds = 30
	default:
		rounds = 200
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash seed %d, %d rounds (replay: -run TestCrashRecovery -crash.seed=%d -crash.rounds=%d)", seed, rounds, seed, rounds)
	rng := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc908))
	base := t.TempDir()
	st := crashStats{kinds: map[string]int{}}
	var dir string
	var model *crashModel
	chainLeft, chain := 0, 0
	for round := range rounds {
		if chainLeft == 0 {
			chain++
			chainLeft = 1 + rng.IntN(25)
			dir = filepath.Join(base, fmt.Sprintf("chain%03d", chain))
			model = newCrashModel()
		}
		chainLeft--
		fail := func(format string, args ...any) {
			t.Helper()
			kept := crashKeep(dir)
			t.Fatalf("seed %d round %d (chain %d, log kept in %s): %s", seed, round, chain, kept, fmt.Sprintf(format, args...))
		}
		childSeed := rng.Uint64()
		waitLines := rng.IntN(60)
		delay := time.Duration(rng.IntN(4000)) * time.Microsecond
		lines, err := crashRunChild(dir, childSeed, waitLines, delay)
		if err != nil {
			fail("%v", err)
		}
		run, err := parseCrashLines(lines)
		if err != nil {
			fail("%v", err)
		}
		if r := run.ready; r[0] != model.first || r[1] != model.last {
			fail("child opened [%d,%d], model [%d,%d]", r[0], r[1], model.first, model.last)
		}
		for _, op := range run.acked {
			model.apply(op)
		}
		pre := model
		post := model
		if run.inflight != nil {
			post = model.clone()
			post.apply(*run.inflight)
			st.inflight++
		}
		if run.idle {
			st.idle++
		}
		kind := crashInjectTorn(t, dir, rng, run.inflight)
		if kind != "" {
			st.injected++
			st.kinds[kind]++
			if kind == "cut-inflight" {
				post = pre // the in-flight batch was torn: it must be gone
			}
		}
		got, inflightDone, cut, err := crashVerify(dir, pre, post)
		if err != nil {
			fail("%v (injected: %q; in flight: %+v; last lines: %q)", err, kind, run.inflight, lines[max(0, len(lines)-3):])
		}
		if cut {
			st.cut++
		}
		if inflightDone {
			st.inflightPresent++
		}
		model = got
		st.rounds++
	}
	t.Logf("crash: %d rounds, %d chains; %d kills with an operation in flight (%d of them found done), %d children idle; tails cut on open: %d; injected torn tails: %d %v",
		st.rounds, chain, st.inflight, st.inflightPresent, st.idle, st.cut, st.injected, st.kinds)
}

// crashKeep copies a failing log directory out of the test's temporary
// directory so it survives for inspection.
func crashKeep(dir string) string {
	keep, err := os.MkdirTemp("", "wal-crash-fail-")
	if err != nil {
		return dir + " (not kept: " + err.Error() + ")"
	}
	if err := os.CopyFS(keep, os.DirFS(dir)); err != nil {
		return dir + " (not kept: " + err.Error() + ")"
	}
	return keep
}

// crashRunChild starts a child on dir, waits until it reported ready and then
// waitLines more lines (or went idle), waits delay, SIGKILLs it and returns
// every protocol line it wrote.
func crashRunChild(dir string, seed uint64, waitLines int, delay time.Duration) ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvSeed+"="+strconv.FormatUint(seed, 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), crashPrefix); ok {
				ch <- s
			}
		}
		close(ch)
	}()
	var lines []string
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	ready, exited := false, false
wait:
	for !ready || waitLines > 0 {
		select {
		case s, ok := <-ch:
			if !ok {
				exited = true
				break wait
			}
			lines = append(lines, s)
			switch {
			case strings.HasPrefix(s, "fatal"):
				break wait
			case s == "idle":
				break wait
			case strings.HasPrefix(s, "ready"):
				ready = true
			default:
				waitLines--
			}
		case <-deadline.C:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return lines, fmt.Errorf("child stalled: %d lines, stderr:\n%s", len(lines), stderr.String())
		}
	}
	if !exited && delay > 0 {
		time.Sleep(delay) // the random kill moment is the fault, not a wait for state
	}
	_ = cmd.Process.Kill()
	for s := range ch {
		lines = append(lines, s)
	}
	werr := cmd.Wait()
	for _, s := range lines {
		if strings.HasPrefix(s, "fatal") {
			return lines, fmt.Errorf("child: %s\nstderr:\n%s", s, stderr.String())
		}
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return lines, fmt.Errorf("child: wait: %v", werr)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return lines, fmt.Errorf("child ended by itself (%v) before the kill; stderr:\n%s", werr, stderr.String())
	}
	return lines, nil
}

// crashInjectTorn sometimes damages the end of the log the way a power loss
// would (the kill alone leaves complete writes in the page cache): it cuts
// the in-flight batch's frame short, appends zeros (preallocation) or
// garbage, or leaves a next segment file with a partial header (a torn
// segment creation). It returns what it did, or "".
func crashInjectTorn(t *testing.T, dir string, rng *rand.Rand, inflight *crashOp) string {
	t.Helper()
	names, seqs, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil || len(names) == 0 {
		return ""
	}
	lastSeg := filepath.Join(dir, names[len(names)-1])
	appendBytes := func(b []byte) {
		f, err := os.OpenFile(lastSeg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := segment.ScanSegment(wal.OSFS{}, lastSeg)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Bad != nil {
		return "" // the kill already tore it; one crash tears one thing
	}
	switch r := rng.IntN(12); {
	case r < 4 && inflight != nil && inflight.kind == "store":
		if len(sc.Frames) == 0 {
			return ""
		}
		fr := sc.Frames[len(sc.Frames)-1]
		if fr.Cnt == 0 || sc.Recs[fr.First].Info.Index != inflight.a || fr.Cnt != int(inflight.b-inflight.a+1) {
			return "" // the in-flight frame never reached this file
		}
		at := fr.Off + 1 + rng.Int64N(fr.End-fr.Off-1)
		if err := os.Truncate(lastSeg, at); err != nil {
			t.Fatal(err)
		}
		return "cut-inflight"
	case r < 6:
		appendBytes(make([]byte, 1+rng.IntN(8192)))
		return "zeros"
	case r < 7:
		b := make([]byte, 1+rng.IntN(4096))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		appendBytes(b)
		return "garbage"
	case r < 8:
		hdr := segment.SegHeader{Version: segment.FormatVersion, Seq: seqs[len(seqs)-1] + 1, Base: 1}.Encode()
		name := filepath.Join(dir, segment.SegName(seqs[len(seqs)-1]+1))
		if err := os.WriteFile(name, hdr[:rng.IntN(segment.SegHeaderSize)], 0o600); err != nil {
			t.Fatal(err)
		}
		return "torn-creation"
	}
	return ""
}

// crashSegDigest maps each segment file to a digest of its content.
func crashSegDigest(dir string) (map[string][32]byte, error) {
	out := map[string][32]byte{}
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out[n] = sha256.Sum256(b)
	}
	return out, nil
}

// crashVerify reopens dir and checks it holds pre or post (the model before
// and after the in-flight operation); it returns the one it holds, with the
// first index the log actually has (the model's: a compaction is durable
// when it returns). inflightDone reports
// that it holds post; cut that Open changed the segment files. A second Open
// must change nothing.
func crashVerify(dir string, pre, post *crashModel) (got *crashModel, inflightDone, cut bool, err error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if pre.last != 0 {
			return nil, false, false, fmt.Errorf("log directory missing, model [%d,%d]", pre.first, pre.last)
		}
	}
	before, err := crashSegDigest(dir)
	if err != nil {
		return nil, false, false, err
	}
	l, err := wal.Open(dir, wal.WithCacheSize(0))
	if err != nil {
		return nil, false, false, fmt.Errorf("open after kill: %w", err)
	}
	if rep := l.Repaired(); rep != nil {
		l.Close()
		return nil, false, false, fmt.Errorf("open without Repair reported a repair: %+v", rep)
	}
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	got = pre
	if errPre := crashCheck(l, first, last, pre); errPre != nil {
		if post == pre {
			l.Close()
			return nil, false, false, errPre
		}
		if errPost := crashCheck(l, first, last, post); errPost != nil {
			l.Close()
			return nil, false, false, fmt.Errorf("log matches neither the state before the in-flight operation (%v) nor after it (%v)", errPre, errPost)
		}
		got, inflightDone = post, true
	}
	if run := inflightReset(pre, post) && got == pre; run && last != 0 {
		// A kill inside a reset, before its segment: the stored term index
		// is cleared first, so the log may know terms from its first
		// index on only.
		if _, ok := l.TermAt(got.termsFrom); !ok {
			got = got.clone()
			got.termsFrom = first
		}
	}
	if err := crashCheckTerms(l, last, got); err != nil {
		l.Close()
		return nil, false, false, err
	}
	if pf := l.PersistedFloor(); pf < got.floor {
		l.Close()
		return nil, false, false, fmt.Errorf("persisted floor %d below floor %d acknowledged with a batch", pf, got.floor)
	}
	if err := l.Close(); err != nil {
		return nil, false, false, err
	}
	after, err := crashSegDigest(dir)
	if err != nil {
		return nil, false, false, err
	}
	l2, err := wal.Open(dir, wal.WithCacheSize(0))
	if err != nil {
		return nil, false, false, fmt.Errorf("second open: %w", err)
	}
	f2, _ := l2.FirstIndex()
	l2last, _ := l2.LastIndex()
	if err := l2.Close(); err != nil {
		return nil, false, false, err
	}
	if f2 != first || l2last != last {
		return nil, false, false, fmt.Errorf("second open: [%d,%d], first open [%d,%d]", f2, l2last, first, last)
	}
	again, err := crashSegDigest(dir)
	if err != nil {
		return nil, false, false, err
	}
	if !maps32Equal(after, again) {
		return nil, false, false, fmt.Errorf("second open changed segment files: %d before, %d after", len(after), len(again))
	}
	got = got.clone()
	got.first = first
	return got, inflightDone, !maps32Equal(before, after), nil
}

func maps32Equal(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// crashCheck compares the open log with model m.
func crashCheck(l *wal.Log, first, last uint64, m *crashModel) error {
	if last != m.last {
		return fmt.Errorf("last index %d, want %d", last, m.last)
	}
	if m.last == 0 {
		if first != 0 {
			return fmt.Errorf("empty log has first index %d", first)
		}
		return nil
	}
	if first != m.first {
		return fmt.Errorf("first index %d, want %d (a compaction is durable per entry)", first, m.first)
	}
	for i := first; i <= last; i++ {
		term, ok := m.terms[i]
		if !ok {
			return fmt.Errorf("index %d present but never stored in this log's history", i)
		}
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			return fmt.Errorf("get %d: %w", i, err)
		}
		if e.Index != i || e.Term != term || e.Type != raft.LogCommand {
			return fmt.Errorf("index %d: got index %d term %d type %v, want term %d", i, e.Index, e.Term, e.Type, term)
		}
		if want := crashPayload(i, term); string(e.Data) != string(want) {
			return fmt.Errorf("index %d term %d: payload differs (len %d crc %08x, want len %d crc %08x)",
				i, term, len(e.Data), segment.Checksum(e.Data), len(want), segment.Checksum(want))
		}
	}
	var e raft.Log
	if err := l.GetLog(last+1, &e); !errors.Is(err, raft.ErrLogNotFound) {
		return fmt.Errorf("get %d past the end: %v", last+1, err)
	}
	return nil
}

// inflightReset reports whether post is pre after a reset.
func inflightReset(pre, post *crashModel) bool {
	return pre != post && post.last == 0 && post.termsFrom == 0 && pre.last != 0
}

// crashCheckTerms compares the log's term index with model m: every index
// from m.termsFrom to the last (compacted ones too) answers its term, and
// nothing below or past them answers at all.
func crashCheckTerms(l *wal.Log, last uint64, m *crashModel) error {
	if m.termsFrom != 0 {
		for i := m.termsFrom; i <= last; i++ {
			got, ok := l.TermAt(i)
			if want := m.terms[i]; !ok || got != want {
				return fmt.Errorf("term index at %d: term %d known %v, want term %d (known from %d)", i, got, ok, want, m.termsFrom)
			}
		}
	}
	for _, i := range []uint64{m.termsFrom - 1, last + 1} {
		if i == 0 || (m.termsFrom == 0 && i != last+1) {
			continue
		}
		if got, ok := l.TermAt(i); ok {
			return fmt.Errorf("term index at %d: term %d known, outside [%d,%d]", i, got, m.termsFrom, last)
		}
	}
	return nil
}

// A crash during a reset (DeleteRange of the whole log) can leave older
// segment files behind after the reset segment is durable. They must never
// replay again: Open removes them, so a later compaction that removes the
// reset segment cannot bring them back (as a gap that refuses Open, or as
// stale entries).
func TestCrashMidResetLeftoversNeverRevive(t *testing.T) {
	dir := t.TempDir()
	var floor atomic.Uint64
	open := func() *wal.Log {
		t.Helper()
		l, err := wal.Open(dir, wal.WithSegmentSize(4<<10), wal.WithCacheSize(0))
		if err != nil {
			t.Fatal(err)
		}
		l.SetCommitFloor(floor.Load)
		return l
	}
	store := func(l *wal.Log, a, b, term uint64) {
		t.Helper()
		for i := a; i <= b; i += 8 {
			var batch []*raft.Log
			for k := i; k < i+8 && k <= b; k++ {
				batch = append(batch, crashEntry(k, term))
			}
			if err := l.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	l := open()
	store(l, 1, 200, 1)
	// What the kill leaves: the pre-reset segment files.
	old := map[string][]byte{}
	names, _, err := segment.SegmentFiles(wal.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		old[n] = b
	}
	floor.Store(150)
	if err := l.DeleteRange(1, 200); err != nil {
		t.Fatal(err)
	}
	store(l, 151, 400, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for n, b := range old {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := newCrashModel()
	for i := uint64(151); i <= 400; i++ {
		m.terms[i] = 2
	}
	m.first, m.last = 151, 400

	l = open()
	if err := crashCheck(l, 151, 400, m); err != nil {
		t.Fatalf("after a crash mid-reset: %v", err)
	}
	for n := range old {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("pre-reset segment %s still on disk after Open: %v", n, err)
		}
	}
	// Compact past every entry of the reset segment: it is removed.
	floor.Store(390)
	if err := l.DeleteRange(151, 390); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m.first = 391
	l = open()
	defer l.Close()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if err := crashCheck(l, first, last, m); err != nil {
		t.Fatalf("after compacting the reset segment away: %v", err)
	}
}
