package fsm

import (
	"bytes"
	"math"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"
)

type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkIndexes asserts that the job-ID tree, the handle table (slots), the
// queue indexes and the digest accumulator all describe the same jobs: every
// slot in the tree is its job's live slot and names the live record, whose
// kept hash is the record's; every queue item resolves to a live record
// whose item it is; the accumulator is the sum of the kept hashes.
func checkIndexes(t fataler, st *state) {
	t.Helper()
	var acc [4]uint64
	live := 0
	st.jobs.Scan(func(e idEnt) bool {
		sl := e.sl
		live++
		switch {
		case sl.j == nil:
			t.Fatalf("job-ID tree slot without a record")
		case e != entOf(sl):
			t.Fatalf("job %q: tree entry's key is not its record's ID", sl.j.id)
		case int(sl.h) >= len(st.slots) || st.slots[sl.h] != sl:
			t.Fatalf("job %q: tree slot is not its handle's live slot", sl.j.id)
		case sl.j.h != sl.h:
			t.Fatalf("job %q: slot and record disagree", sl.j.id)
		case sl.sum != st.hash(sl.j):
			t.Fatalf("job %q: kept hash is not the record's", sl.j.id)
		case sl.gen > st.gen:
			t.Fatalf("job %q: slot of generation %d, state at %d", sl.j.id, sl.gen, st.gen)
		}
		for i, v := range sl.sum {
			acc[i] += v
		}
		return true
	})
	if acc != st.acc {
		t.Fatalf("accumulator %x, sum of kept hashes %x", st.acc, acc)
	}
	used := 0
	for _, sl := range st.slots {
		if sl != nil {
			used++
		}
	}
	seen := map[uint32]bool{}
	for _, h := range st.free {
		if int(h) >= len(st.slots) || st.slots[h] != nil || seen[h] {
			t.Fatalf("free handle %d is in use or listed twice", h)
		}
		seen[h] = true
	}
	if used != live || used+len(st.free) != len(st.slots) {
		t.Fatalf("%d live handles, %d free, table of %d, %d jobs in the tree", used, len(st.free), len(st.slots), live)
	}
	total := 0
	classJobs := map[*class]int{}
	// check asserts tree's items are records of q in a state ok accepts
	// (and of kind, unless empty), of a class interned in q.
	check := func(q *queue, tr *tree, kind string, ok func(State) bool) {
		tr.Scan(func(it item) bool {
			j := st.rec(it)
			if j == nil || itemOf(j) != it || j.cls.q != q || j.cls.queue != q.name || !ok(j.state) || (kind != "" && j.cls.kind != kind) {
				t.Fatalf("queue %q kind %q: item %+v does not match its record", q.name, kind, it)
			}
			if got, found := st.jobs.Get(entOf(st.slots[j.h])); !found || got.sl.j != j {
				t.Fatalf("queue %q: job %q is not the job-ID tree's record", q.name, j.id)
			}
			if q.classes[j.cls.classKey] != j.cls {
				t.Fatalf("queue %q: job %q's class %+v is not interned", q.name, j.id, j.cls.classKey)
			}
			if kind == "" {
				classJobs[j.cls]++
			}
			return true
		})
	}
	is := func(s State) func(State) bool { return func(x State) bool { return x == s } }
	st.queues.Scan(func(q *queue) bool {
		check(q, q.ready, "", is(StatePending))
		check(q, q.sched, "", is(StateScheduled))
		check(q, q.running, "", is(StateRunning))
		check(q, q.done, "", State.Terminal)
		check(q, q.waiting, "", is(StateWaiting))
		total += q.ready.Len() + q.sched.Len() + q.running.Len() + q.done.Len() + q.waiting.Len()
		n := map[string]int{}
		for _, tr := range []*tree{q.ready, q.sched} {
			tr.Scan(func(it item) bool {
				n[st.rec(it).cls.kind]++
				return true
			})
		}
		if len(n) != len(q.byKind) || (len(n) > 1 && !q.split) {
			t.Fatalf("queue %q: %d kinds pending or scheduled, %d counted (split %v)", q.name, len(n), len(q.byKind), q.split)
		}
		for kind, k := range q.byKind {
			if k.n != n[kind] {
				t.Fatalf("queue %q kind %q: counted %d, holds %d", q.name, kind, k.n, n[kind])
			}
			if q.split {
				check(q, k.ready, kind, is(StatePending))
				check(q, k.sched, kind, is(StateScheduled))
				if k.ready.Len()+k.sched.Len() != k.n {
					t.Fatalf("queue %q kind %q: trees hold %d, counted %d", q.name, kind, k.ready.Len()+k.sched.Len(), k.n)
				}
			} else if k.ready != nil && k.ready.Len()+k.sched.Len() != 0 {
				t.Fatalf("queue %q kind %q: unsplit queue with a filled kind tree", q.name, kind)
			}
		}
		for k, c := range q.classes {
			if c.classKey != k || c.q != q || c.queue != q.name || c.n != classJobs[c] || c.n == 0 {
				t.Fatalf("queue %q: class %+v counts %d jobs, holds %d", q.name, k, c.n, classJobs[c])
			}
			delete(classJobs, c)
		}
		return true
	})
	for c, n := range classJobs {
		t.Fatalf("class %+v of %d jobs not interned in its queue", c.classKey, n)
	}
	checkDepIndexes(t, st)
	if total != live {
		t.Fatalf("queue indexes hold %d jobs, the job-ID tree %d", total, live)
	}
}

// TestSlotsAgreeUnderSnapshots applies random entries while up to three
// snapshots stay open across many of them (the in-place record swaps must
// never reach a snapshot; the generation counter wraps on the way), checking every index after each entry and that
// each snapshot persists, whenever it is persisted, the bytes it persisted
// when taken, which restore to the digest of that point.
func TestSlotsAgreeUnderSnapshots(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t)
		// Start a few snapshots short of the generation's wrap.
		w.real.st.gen = math.MaxUint32 - uint32(rapid.IntRange(0, 3).Draw(t, "wrap"))
		type open struct {
			snap  Snapshot
			bytes []byte
			at    Digest
		}
		var snaps []open
		persist := func(s Snapshot) []byte {
			var buf bytes.Buffer
			if err := s.Persist(&buf); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			w.step(t)
			checkIndexes(t, w.real.st)
			if len(snaps) < 3 && rapid.IntRange(0, 6).Draw(t, "take") == 0 {
				s, err := w.real.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				snaps = append(snaps, open{s, persist(s), w.real.Digest()})
			}
			if len(snaps) > 0 && (rapid.IntRange(0, 8).Draw(t, "release") == 0 || i == steps-1) {
				k := rapid.IntRange(0, len(snaps)-1).Draw(t, "which")
				o := snaps[k]
				if got := persist(o.snap); !bytes.Equal(got, o.bytes) {
					t.Fatalf("snapshot at %d persisted other bytes after later entries", o.at.Index)
				}
				r := New()
				if err := r.Restore(bytes.NewReader(o.bytes)); err != nil {
					t.Fatal(err)
				}
				if r.Digest() != o.at {
					t.Fatalf("snapshot at %d restored to another digest", o.at.Index)
				}
				checkIndexes(t, r.st)
				o.snap.Release()
				snaps = append(snaps[:k], snaps[k+1:]...)
			}
		}
	})
}

// TestKindSplit walks a queue from one kind (no kind trees: the queue's
// own trees serve claims naming that kind) to two (split: trees built from
// the queue's) and back to none, checking claims by kind, Claimable and
// every index at each step.
func TestKindSplit(t *testing.T) {
	h := newHarness(t)
	q := func() *queue { return h.m.st.queue("q") }
	claimKinds := func(kinds ...string) []string {
		var ids []string
		for _, j := range h.ok(&ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 10, TTL: time.Minute, Kinds: kinds}).Jobs {
			ids = append(ids, j.ID)
		}
		checkIndexes(t, h.m.st)
		return ids
	}
	claimable := func(kind string) bool { return h.m.Claimable([]string{"q"}, []string{kind}, h.now) }
	h.submit(NewJob{ID: "a1", Queue: "q", Kind: "a"})
	h.submit(NewJob{ID: "a2", Queue: "q", Kind: "a", RunAt: h.now.Add(time.Hour)})
	checkIndexes(t, h.m.st)
	if q().split || !claimable("a") || claimable("b") {
		t.Fatalf("one kind: split %v, claimable a %v b %v", q().split, claimable("a"), claimable("b"))
	}
	if got := claimKinds("b"); len(got) != 0 {
		t.Fatalf("claim of kind b took %v", got)
	}
	h.submit(NewJob{ID: "b1", Queue: "q", Kind: "b"})
	h.submit(NewJob{ID: "a3", Queue: "q", Kind: "a"})
	checkIndexes(t, h.m.st)
	if !q().split || !claimable("b") {
		t.Fatalf("two kinds: split %v, claimable b %v", q().split, claimable("b"))
	}
	if got := claimKinds("b"); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("claim of kind b took %v, want b1", got)
	}
	if !q().split {
		t.Fatal("a queue left with one kind merged its kind trees (it stays split until it holds none)")
	}
	if got := claimKinds("a", "b"); len(got) != 2 {
		t.Fatalf("claim of kinds a, b took %v, want a1 and a3", got)
	}
	h.now = h.now.Add(2 * time.Hour) // a2 is due
	if got := claimKinds("a"); len(got) != 1 || got[0] != "a2" {
		t.Fatalf("claim of kind a took %v, want a2", got)
	}
	if q().split || len(q().byKind) != 0 || claimable("a") {
		t.Fatalf("no pending job: split %v, %d kinds counted", q().split, len(q().byKind))
	}
	h.submit(NewJob{ID: "b2", Queue: "q", Kind: "b"})
	if got := claimKinds("a"); len(got) != 0 || q().split {
		t.Fatalf("one kind again: claim of kind a took %v, split %v", got, q().split)
	}
	if got := claimKinds("b"); len(got) != 1 || got[0] != "b2" {
		t.Fatalf("claim of kind b took %v, want b2", got)
	}
}

// TestGenerationWrap: when the snapshot generation wraps, a slot made
// 2^32 snapshots ago (whose generation the counter reaches again) must not
// be taken for a live one: the snapshot taken at the wrap keeps its record.
func TestGenerationWrap(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "old", Queue: "q", Kind: "k"})
	st := h.m.st
	st.gen = math.MaxUint32
	st.slots[st.jobs.Len()-1].gen = 1 // as if made 2^32 snapshots ago
	s, err := h.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var before, after bytes.Buffer
	if err := s.Persist(&before); err != nil {
		t.Fatal(err)
	}
	if st.gen != 1 {
		t.Fatalf("generation %d after the wrap, want 1", st.gen)
	}
	h.claim1("q", time.Minute)
	checkIndexes(t, st)
	if err := s.Persist(&after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before.Bytes(), after.Bytes()) {
		t.Fatal("the claim after the wrap changed the snapshot taken at it")
	}
}

// TestRecordSizes pins what every pending job holds to the size classes
// it fills: the record 128 bytes (class 128), its slot 48 (class 48), a
// queue index item 24 (inline in tree nodes). A field that pushes one past
// its size costs every job the next class (the record 144 bytes, the slot
// 64): per pending job about 300 bytes beyond its payload in all
// (BenchmarkHeapPerPendingJob; docs/bench.md's goal). Move a rarely set
// field behind a pointer (outcome), or into the job's class (class.go) if
// jobs of a queue and kind share it, before growing these.
func TestRecordSizes(t *testing.T) {
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"job record (job)", unsafe.Sizeof(job{}), 128},
		{"job slot (slot)", unsafe.Sizeof(slot{}), 48},
		{"queue index item (item)", unsafe.Sizeof(item{}), 24},
	} {
		if c.got > c.want {
			t.Errorf("%s is %d bytes, more than %d: every job would pay the next size class (see TestRecordSizes)", c.what, c.got, c.want)
		}
	}
}
