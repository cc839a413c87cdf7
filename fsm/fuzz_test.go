package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func seedCommands() [][]byte {
	var out [][]byte
	for _, c := range []Command{
		&SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k", Payload: []byte("p"), IdempotencyKey: "k"}, {Queue: "q", Kind: "k", RunAt: baseTime.Add(time.Second)}}},
		&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Second},
		&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 2, TTL: time.Second, Kinds: []string{"k", "x"}},
		&ExtendCmd{ID: "a", Token: 2, TTL: time.Second}, &AckCmd{ID: "a", Token: 2, Result: []byte("r")},
		&NakCmd{ID: "a", Token: 2, Delay: time.Second, Error: "e"}, &TermCmd{ID: "a", Token: 2, Reason: "r"},
		&CancelCmd{ID: "a"}, &RetryCmd{ID: "a"}, &ExpireCmd{LeaderSince: baseTime}, &PauseCmd{Queue: "q"},
		&ResumeCmd{Queue: "q"}, &SweepCmd{MaxAge: time.Second, MaxPerQueue: 1},
		&BatchCmd{Cmds: []Command{&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Second}, &NakCmd{ID: "a", Token: 2}}},
		&BatchCmd{Cmds: []Command{&AckCmd{ID: "a", Token: 2}, &ExtendCmd{ID: "a", Token: 2, TTL: time.Second}}},
		// Dependencies and a batch (deps.go): a term of a cascades, an ack releases.
		&SubmitCmd{Jobs: []NewJob{{ID: "c", Queue: "q", Kind: "k", After: []string{"a"}}, {ID: "d", Queue: "q", Kind: "k", After: []string{"c", "e"}, OnParentFailure: ParentFailDead},
			{ID: "e", Queue: "q", Kind: "k"}}, Batch: &BatchSpec{ID: "b", Completion: &NewJob{Queue: "q", Kind: "done"}}},
		&TermCmd{ID: "c", Token: 2, Reason: "r"},
		&ScheduleCmd{Def: ScheduleDef{ID: "s", Every: time.Second, Job: Template{Queue: "q", Kind: "k", Payload: []byte("p")}, Overlap: OverlapOne}},
		&ScheduleCmd{Def: ScheduleDef{ID: "c", Cron: "*/2 * * * * *", Zone: Zone{Name: "Z", Offset: 3600, Shifts: []ZoneShift{{At: 1e9, Offset: 7200}}}, Job: Template{Queue: "q", Kind: "k"}}},
		&ScheduleSetCmd{ID: "s", Op: SchedulePause}, &ScheduleSetCmd{ID: "s", Op: ScheduleDelete}, &FireCmd{},
		&SetLimitCmd{Queue: "q", Max: 1}, &SetLimitCmd{Queue: "q", Kind: "k", Max: 2}, &ClearLimitCmd{Queue: "q", Kind: "k"},
		&SetRateCmd{Queue: "q", Every: time.Second, Burst: 2}, &ClearRateCmd{Queue: "q"},
		&SubmitCmd{Jobs: []NewJob{{Queue: "q", Kind: "k", Payload: []byte("u"), Unique: &UniqueOpts{Period: time.Minute, States: DefaultUniqueStates}}, {Queue: "q", Kind: "k"}}},
	} {
		out = append(out, appendCommand(nil, c))
	}
	return out
}

func decodeErrTyped(err error) bool {
	for _, s := range []error{ErrInvalidCommand, ErrUnknownCommand, ErrUnsupportedVersion, ErrTooLarge} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func FuzzDecodeCommand(f *testing.F) {
	for _, b := range seedCommands() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if !decodeErrTyped(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Re-encoding round-trips (varints may be non-minimal in b, so
		// compare decoded values, not bytes).
		again, err := DecodeCommand(appendCommand(nil, c))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip of %x: %v\n%+v\n%+v", b, err, c, again)
		}
	})
}

// FuzzApply applies a sequence of fuzzed entries (separated in the input)
// after a fixed prelude: Apply must not panic, must answer a decodable
// result, and a refusal must not change the state.
func FuzzApply(f *testing.F) {
	seeds := seedCommands()
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+1)%len(seeds)], int64(i))
	}
	// The prelude claims a with token 2; its ack then releases c, which
	// waited for it: a lease command's result that moved a dependency
	// (result version 5, which ScanBatch leaves to DecodeResult).
	f.Add(appendCommand(nil, &SubmitCmd{Jobs: []NewJob{{ID: "c", Queue: "q", Kind: "k", After: []string{"a"}}}}),
		appendCommand(nil, &AckCmd{ID: "a", Token: 2}), int64(0))
	f.Add(appendCommand(nil, &SubmitCmd{Jobs: []NewJob{{ID: "c", Queue: "q", Kind: "k", After: []string{"a"}, OnParentFailure: ParentFailDead}}}),
		appendCommand(nil, &BatchCmd{Cmds: []Command{&TermCmd{ID: "a", Token: 2, Reason: "r"}}}), int64(0))
	f.Fuzz(func(t *testing.T, c1, c2 []byte, dt int64) {
		m := New()
		var index uint64
		now := baseTime
		for _, c := range append(seedCommands()[:2], c1, c2, c1) {
			index++
			now = now.Add(time.Duration(dt))
			before := m.stateSum()
			out := m.Apply(Entry{Index: index, Term: index / 3, Time: now, Cmd: c})
			r, err := DecodeResult(out)
			if err != nil {
				t.Fatalf("result: %v", err)
			}
			checkScanBatch(t, out, r, (r.Command == CmdBatch || Batchable(r.Command)) && r.Code == CodeOK && !movedDeps(r))
			if r.Code != CodeOK && m.stateSum() != before {
				t.Fatalf("refused %s changed the state", r.Command)
			}
		}
		snap, _ := m.Snapshot()
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			t.Fatal(err)
		}
		r := New()
		if err := r.Restore(&buf); err != nil || r.Digest() != m.Digest() {
			t.Fatalf("snapshot round trip: %v", err)
		}
	})
}

func FuzzRestore(f *testing.F) {
	m := New()
	for i, c := range seedCommands()[:2] {
		m.Apply(Entry{Index: uint64(i + 1), Term: 1, Time: baseTime, Cmd: c})
	}
	m.Apply(Entry{Index: 3, Term: 1, Time: baseTime, Cmd: appendCommand(nil, &PauseCmd{Queue: "p"})})
	snap, _ := m.Snapshot()
	var buf bytes.Buffer
	_ = snap.Persist(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New()
		err := r.Restore(bytes.NewReader(b))
		// The sequential read (one record at a time, no decoder
		// goroutine: snapshot_load.go) agrees, error message included.
		seq := New()
		var errSeq error
		func() {
			defer func(d, n int) { decoders, chunkRecords = d, n }(decoders, chunkRecords)
			decoders, chunkRecords = 1, 1
			errSeq = seq.Restore(bytes.NewReader(b))
		}()
		if fmt.Sprint(err) != fmt.Sprint(errSeq) || seq.Digest() != r.Digest() {
			t.Fatalf("restore: %v; sequential: %v", err, errSeq)
		}
		if err != nil {
			if !IsCorrupt(err) && !errors.Is(err, ErrSnapshotVersion) {
				t.Fatalf("untyped error %v", err)
			}
			if r.Len() != 0 || r.AppliedIndex() != 0 {
				t.Fatal("failed restore changed the state")
			}
			return
		}
		// Whatever restored must snapshot back to the same digest.
		s, _ := r.Snapshot()
		var out bytes.Buffer
		if err := s.Persist(&out); err != nil {
			t.Fatal(err)
		}
		r2 := New()
		if err := r2.Restore(&out); err != nil || r2.Digest() != r.Digest() {
			t.Fatalf("re-snapshot: %v", err)
		}
	})
}

// Regression (found by FuzzApply): a job whose Max was below the default
// Base was stored with Max < Base, which Restore refuses — a state its own
// snapshot could not restore.
func TestBackoffMaxBelowDefaultBaseRestores(t *testing.T) {
	j := New()
	cmd, err := EncodeCommand(SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k", Backoff: Backoff{Max: 500 * time.Millisecond}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := DecodeResult(j.Apply(Entry{Index: 1, Term: 1, Time: time.Unix(1, 0), Cmd: cmd})); err != nil || r.Err() != nil {
		t.Fatalf("submit: %v %v", err, r.Err())
	}
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	k := New()
	if err := k.Restore(&buf); err != nil {
		t.Fatalf("restore of its own snapshot: %v", err)
	}
	if k.Digest() != j.Digest() {
		t.Fatal("digest differs after restore")
	}
}

// checkScanBatch checks ScanBatch against the decoded result r of b: it
// reads b only when b is a successful batch result (and then must when
// mustRead), reports exactly whether one of its naks changed a job, lists
// the IDs of its successful commands' job records in order, and stops
// listing when told (reporting the same).
func checkScanBatch(t *testing.T, b []byte, r Result, mustRead bool) {
	t.Helper()
	var ids []string
	requeues, ok := ScanBatch(b, func(id string) bool { ids = append(ids, strings.Clone(id)); return true })
	if bare, bareOK := ScanBatch(b, nil); bare != requeues || bareOK != ok {
		t.Fatalf("ScanBatch without ids = %v, %v; with ids %v, %v", bare, bareOK, requeues, ok)
	}
	if !ok {
		if mustRead {
			t.Fatalf("ScanBatch cannot read a batch result Apply returned")
		}
		return
	}
	if movedDeps(r) {
		// The jobs it moved through dependencies (a cascade, a batch
		// completed) are not among the records ScanBatch lists: a
		// caller that trusted it would miss their new states.
		t.Fatalf("ScanBatch read a %s result that moved dependencies", r.Command)
	}
	if (r.Command != CmdBatch && !Batchable(r.Command)) || r.Code != CodeOK {
		t.Fatalf("ScanBatch read a %s result with code %s", r.Command, r.Code)
	}
	if r.Command != CmdBatch {
		r.Batch = []Result{r} // a lease command alone reads as a batch of one
	}
	want := false
	var wantIDs, wantStates []string
	for _, sr := range r.Batch {
		want = want || (sr.Command == CmdNak && sr.Code == CodeOK && sr.Changed)
		if sr.Code == CodeOK {
			for _, j := range sr.Jobs {
				wantIDs = append(wantIDs, j.ID)
				wantStates = append(wantStates, j.ID+" "+j.State.String())
			}
		}
	}
	var states []string
	if _, ok := ScanBatchStates(b, func(id string, st State) bool { states = append(states, id+" "+st.String()); return true }); !ok || fmt.Sprint(states) != fmt.Sprint(wantStates) {
		t.Fatalf("ScanBatchStates listed %q (ok %v), the decoded batch has %q", states, ok, wantStates)
	}
	if requeues != want {
		t.Fatalf("ScanBatch requeues = %v, the decoded batch says %v", requeues, want)
	}
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Fatalf("ScanBatch listed %q, the decoded batch has %q", ids, wantIDs)
	}
	if len(wantIDs) > 1 {
		n := 0
		stopped, ok := ScanBatch(b, func(string) bool { n++; return false })
		if n != 1 || stopped != requeues || !ok {
			t.Fatalf("ScanBatch told to stop: %d calls, requeues %v, ok %v; want 1, %v, true", n, stopped, ok, requeues)
		}
	}
}

// movedDeps reports whether r, or a command of its batch, moved jobs
// through dependencies (result version 5).
func movedDeps(r Result) bool {
	if len(r.Cascade) > 0 || len(r.Completed) > 0 {
		return true
	}
	for _, sr := range r.Batch {
		if movedDeps(sr) {
			return true
		}
	}
	return false
}

// FuzzScanBatch: on any input ScanBatch does not panic, and where
// DecodeResult reads the same bytes, it agrees with it.
func FuzzScanBatch(f *testing.F) {
	m := New()
	for i, c := range seedCommands() {
		f.Add(m.Apply(Entry{Index: uint64(i + 1), Term: 1, Time: baseTime, Cmd: c}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, ok := ScanBatch(b, func(string) bool { return true }); !ok {
			return
		}
		if r, err := DecodeResult(b); err == nil {
			checkScanBatch(t, b, r, true)
		}
	})
}
