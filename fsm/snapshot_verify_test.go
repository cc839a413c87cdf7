package fsm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/btree"
)

// agree runs Restore and VerifySnapshot on b (the verifier with a filter
// of words 64-bit words: 1 forces the second read) and fails unless they
// agree on accept or refuse, the kind of refusal, and the index, job count
// and digest of an accepted stream. It returns Restore's error.
func agree(t *testing.T, b []byte, words int) error {
	t.Helper()
	r := New()
	errR := r.Restore(bytes.NewReader(b))
	reread := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	var (
		info SnapshotInfo
		errV error
	)
	if words == 0 {
		info, errV = VerifySnapshot(bytes.NewReader(b), int64(len(b)), reread)
	} else {
		info, errV = verifyWith(bytes.NewReader(b), make(bloom, words), reread)
	}
	switch {
	case (errR == nil) != (errV == nil):
		t.Fatalf("restore: %v; verify: %v (%d bytes)", errR, errV, len(b))
	case errR != nil:
		for _, class := range []error{ErrCorruptSnapshot, ErrSnapshotVersion} {
			if errors.Is(errR, class) != errors.Is(errV, class) {
				t.Fatalf("restore: %v; verify: %v: another kind of refusal", errR, errV)
			}
		}
	case info.Index != r.AppliedIndex() || info.Jobs != r.Len() || info.Digest != r.Digest().Sum:
		t.Fatalf("verify found index %d, %d jobs, digest %x; restore %d, %d, %x",
			info.Index, info.Jobs, info.Digest, r.AppliedIndex(), r.Len(), r.Digest().Sum)
	}
	return errR
}

// richState applies the fuzz seeds' commands plus jobs waiting for
// parents of smaller and greater IDs: every record kind and every rule
// between records is in its snapshot.
func richState(t testing.TB) *Jobs {
	t.Helper()
	m := New()
	cmds := seedCommands()
	cmds = append(cmds,
		appendCommand(nil, &PauseCmd{Queue: "p"}),
		appendCommand(nil, &SubmitCmd{Jobs: []NewJob{{ID: "g", Queue: "q", Kind: "k"}, {ID: "y", Queue: "q", Kind: "k", IdempotencyKey: "ky"}}}),
		appendCommand(nil, &SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k", After: []string{"g", "y"}}}}),
		appendCommand(nil, &SetLimitCmd{Queue: "q", Kind: "k", Max: 5}),
		appendCommand(nil, &ScheduleCmd{Def: ScheduleDef{ID: "s2", Every: time.Second, Job: Template{Queue: "q", Kind: "k"}}}),
	)
	for i, c := range cmds {
		m.Apply(Entry{Index: uint64(i + 1), Term: 1, Time: baseTime.Add(time.Duration(i) * time.Millisecond), Cmd: c})
	}
	if q, _ := m.Queue("q"); q.Counts.Waiting == 0 {
		t.Fatal("the rich state has no waiting job")
	}
	return m
}

func snapBytes(t testing.TB, m *Jobs) []byte {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Every one-byte change and every truncation of a snapshot holding every
// record kind gets the same verdict from VerifySnapshot as from Restore,
// with the filter sized by the stream and with a one-word filter (every
// fingerprint a suspect: the second read settles them).
func TestVerifySnapshotAgreesWithRestoreOnCorruption(t *testing.T) {
	good := snapBytes(t, richState(t))
	if err := agree(t, good, 0); err != nil {
		t.Fatalf("the rich snapshot: %v", err)
	}
	for _, words := range []int{0, 1} {
		refused := 0
		for i := range good {
			for _, x := range []byte{0x01, 0x80} {
				b := bytes.Clone(good)
				b[i] ^= x
				if agree(t, b, words) != nil {
					refused++
				}
			}
			if agree(t, good[:i], words) == nil {
				t.Fatalf("truncation at %d of %d accepted", i, len(good))
			}
		}
		if refused != 2*len(good) {
			t.Logf("%d of %d flips refused by both (a flip may leave a valid stream only by chance)", refused, 2*len(good))
		}
		if agree(t, append(bytes.Clone(good), 0), words) == nil {
			t.Fatal("a trailing byte accepted")
		}
	}
	old, err := os.ReadFile("testdata/snapshot-v4.bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := agree(t, old, 1); err != nil {
		t.Fatalf("the version 4 snapshot: %v", err)
	}
}

// crafted writes a stream of m's header and jobs after mutate changed
// them, with a valid checksum and state digest (m must have no paused
// queue, limit, schedule or batch): the rules between records are all
// that can refuse it.
func crafted(t *testing.T, m *Jobs, mutate func(js map[string]*job)) []byte {
	t.Helper()
	js := map[string]*job{}
	m.st.jobs.Scan(func(e idEnt) bool {
		js[e.sl.j.id] = e.sl.j.clone()
		return true
	})
	mutate(js)
	st := newState()
	st.index, st.seq, st.clock = m.st.index, m.st.seq, m.st.clock
	tree := btree.NewBTreeGOptions(idLess, btree.Options{NoLocks: true})
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range js {
			if !yield(id) {
				return
			}
		}
	}) {
		j := js[id]
		tree.Set(idEnt{pfx: idPrefix(id), sl: &slot{j: j}})
		lanesAdd(&st.acc, st.hash(j))
	}
	sn := &snapshot{index: st.index, seq: st.seq, clock: st.clock, sum: st.sum(), jobs: tree}
	var buf bytes.Buffer
	if err := sn.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withParent makes j wait for p too.
func withParent(j *job, p string) {
	d := *j.dep()
	d.after = append(slices.Clone(d.after), p)
	d.open = append(slices.Clone(d.open), p)
	j.setDeps(&d)
}

// Each rule between job records that Restore checks through its indexes
// is checked by VerifySnapshot too: a stream breaking only that rule is
// refused by both, and one that only looks like breaking it (same seq,
// another index key) is accepted by both.
func TestVerifySnapshotChecksTheRulesBetweenRecords(t *testing.T) {
	m := New()
	uq := &UniqueOpts{Period: time.Minute, States: DefaultUniqueStates}
	for i, c := range []Command{
		&SubmitCmd{Jobs: []NewJob{{ID: "a", Queue: "q", Kind: "k", IdempotencyKey: "ka"}, {ID: "b", Queue: "q", Kind: "k", IdempotencyKey: "kb"},
			{ID: "c", Queue: "q", Kind: "k", Payload: []byte("1"), Unique: uq}, {ID: "d", Queue: "q", Kind: "k", Payload: []byte("2"), Unique: uq},
			{ID: "e", Queue: "q", Kind: "k", Priority: 3}, {ID: "g", Queue: "q", Kind: "k"}, {ID: "y", Queue: "q", Kind: "k"},
			{ID: "h", Queue: "q", Kind: "k"}, {ID: "z", Queue: "q", Kind: "k"}}},
		&CancelCmd{ID: "h"}, &CancelCmd{ID: "z"},
		&SubmitCmd{Jobs: []NewJob{{ID: "m", Queue: "q", Kind: "k", After: []string{"g", "y"}}}},
	} {
		m.Apply(Entry{Index: uint64(i + 1), Term: 1, Time: baseTime, Cmd: appendCommand(nil, c)})
	}
	for _, tc := range []struct {
		name   string
		ok     bool
		mutate func(js map[string]*job)
	}{
		{"as applied", true, func(map[string]*job) {}},
		{"an idempotency key shared", false, func(js map[string]*job) { js["b"].key = "ka" }},
		{"a unique key held twice", false, func(js map[string]*job) { js["d"].payload = js["c"].payload }}, // the key's sum is the payload's
		{"a queue index key twice", false, func(js map[string]*job) {
			e := js["e"]
			e.seq, e.prio, e.runAt = js["a"].seq, js["a"].prio, js["a"].runAt
		}},
		{"a seq twice under other index keys", true, func(js map[string]*job) { js["e"].seq = js["a"].seq }},
		{"a waiting job's parent of a smaller ID ended", false, func(js map[string]*job) { withParent(js["m"], "h") }},
		{"a waiting job's parent of a greater ID ended", false, func(js map[string]*job) { withParent(js["m"], "z") }},
		{"a waiting job's parent of a smaller ID missing", false, func(js map[string]*job) { delete(js, "g") }},
		{"a waiting job's parent of a greater ID missing", false, func(js map[string]*job) { delete(js, "y") }},
		{"a waiting job's parent of a greater ID not a job", false, func(js map[string]*job) { withParent(js["m"], "zz") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := crafted(t, m, tc.mutate)
			for _, words := range []int{0, 1} {
				if err := agree(t, b, words); (err == nil) != tc.ok {
					t.Fatalf("restore: %v, want ok %v", err, tc.ok)
				}
			}
		})
	}
}

// Without a way to read the stream again, a stream that needs a second
// read is refused ErrSecondRead, not accepted on half the checks.
func TestVerifySnapshotSecondReadNeeded(t *testing.T) {
	b := snapBytes(t, richState(t))
	if _, err := verifyWith(bytes.NewReader(b), make(bloom, 1), nil); !errors.Is(err, ErrSecondRead) {
		t.Fatalf("verify without reread: %v, want ErrSecondRead", err)
	}
	// A second read of other bytes is refused.
	other := snapBytes(t, New())
	_, err := verifyWith(bytes.NewReader(b), make(bloom, 1), func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(other)), nil })
	if !IsCorrupt(err) {
		t.Fatalf("second read of another stream: %v, want corrupt", err)
	}
}

// FuzzVerifySnapshot: on any input, VerifySnapshot and Restore agree on
// accept or refuse and on the digest (go test -fuzz FuzzVerifySnapshot ./fsm).
func FuzzVerifySnapshot(f *testing.F) {
	f.Add(snapBytes(f, richState(f)), false)
	f.Add(snapBytes(f, New()), true)
	f.Add([]byte(snapMagic), false)
	if old, err := os.ReadFile("testdata/snapshot-v4.bin"); err == nil {
		f.Add(old, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, tiny bool) {
		words := 0
		if tiny {
			words = 1
		}
		agree(t, b, words)
	})
}
