package history

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal/segment"
	"github.com/jobraft/jobraft/walcompare"
)

// The self-test of the applied-history checker: it names a stale applied
// entry (member, index, both terms and CRCs), a skipped one, a disagreement
// on a compacted index and an entry beyond the final log, and passes legal
// histories: a lagging member, a member restored from a snapshot, a member
// that restarted and applied everything again, a member ahead of the
// reference's commit index.

type entry struct {
	term uint64
	typ  raft.LogType
	data string
}

// refLogOf builds a reference log holding entries from index first on.
func refLogOf(t *testing.T, first uint64, es ...entry) Log {
	t.Helper()
	s := raft.NewInmemStore()
	var logs []*raft.Log
	for i, e := range es {
		logs = append(logs, &raft.Log{Index: first + uint64(i), Term: e.term, Type: e.typ, Data: []byte(e.data)})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	return memberLog{walcompare.FromLogStore("m1", s)}
}

// memberLog reads a walcompare.Member as a Log (as clustertest.ReferenceLog,
// which this package's tests cannot import).
type memberLog struct{ m walcompare.Member }

func (l memberLog) ScanEntries(ctx context.Context, from, to uint64, fn func(ix uint64, e LogEntry) bool) error {
	return l.m.Scan(ctx, from, to, func(ix uint64, v *walcompare.View) bool {
		return fn(ix, LogEntry{Term: v.Term, Type: v.Type, CRC: v.CRC, Corrupt: v.Corrupt})
	})
}

func applied(ix, term uint64, data string) Record {
	return Record{Kind: KindApplied, Index: ix, Term: term, Type: raft.LogCommand, CRC: segment.Checksum([]byte(data))}
}

func config(ix, term uint64, data string) Record {
	r := applied(ix, term, data)
	r.Type = raft.LogConfiguration
	return r
}

var (
	started = Record{Kind: KindStarted}
	// The committed log of the tests: a configuration, two commands of
	// term 1, the term-2 leader's no-op, two commands of term 2.
	committed = []entry{
		{1, raft.LogConfiguration, "conf"},
		{1, raft.LogCommand, "a"},
		{1, raft.LogCommand, "b"},
		{2, raft.LogNoop, ""},
		{2, raft.LogCommand, "c"},
		{2, raft.LogCommand, "d"},
	}
)

func history(name string, recs ...Record) *Memory {
	m := NewMemory(name)
	m.Append(recs)
	return m
}

func check(t *testing.T, ck *Checker, ref Reference, final bool, srcs ...Source) []Violation {
	t.Helper()
	vs, err := ck.Check(context.Background(), ref, final, srcs...)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestCheckerNamesStaleAppliedEntry(t *testing.T) {
	ref := Reference{Name: "m1", Log: refLogOf(t, 1, committed...), Commit: 6}
	good := history("m1", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"), applied(5, 2, "c"), applied(6, 2, "d"))
	// The deposed term-1 leader applied its own uncommitted entry at 4.
	stale := history("m0", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"), applied(4, 1, "x"))
	ck := NewChecker()
	vs := check(t, ck, ref, false, good, stale)
	if len(vs) != 1 {
		t.Fatalf("%d violations, want 1: %v", len(vs), vs)
	}
	v := vs[0]
	want := fmt.Sprintf("applied-history violation: member m0 applied index 4 term 1 crc %08x, committed log has term 2 crc %08x",
		segment.Checksum([]byte("x")), segment.Checksum(nil))
	if !strings.HasPrefix(v.String(), want) || v.Member != "m0" || v.Applied.Index != 4 || v.Applied.Term != 1 || v.Committed.Term != 2 {
		t.Fatalf("violation %q (%+v), want it to start with %q", v, v, want)
	}
	if !strings.Contains(v.String(), "applied a LogCommand where the committed entry is a LogNoop") {
		t.Errorf("violation %q does not say the committed entry is a no-op", v)
	}
	t.Log(v)
	// Reported once: a later check has nothing new.
	if vs := check(t, ck, ref, true, good, stale); len(vs) != 0 {
		t.Fatalf("second check: %v", vs)
	}

	// The same stale entry, payload only (same term, other bytes).
	ck = NewChecker()
	other := history("m2", started, config(1, 1, "conf"), applied(2, 1, "A"))
	vs = check(t, ck, ref, false, other)
	if len(vs) != 1 || vs[0].Member != "m2" || vs[0].Applied.Index != 2 || vs[0].Committed.CRC != segment.Checksum([]byte("a")) {
		t.Fatalf("payload mismatch: %v", vs)
	}
}

func TestCheckerPassesLegalHistories(t *testing.T) {
	ref := Reference{Name: "m1", Log: refLogOf(t, 1, committed...), Commit: 5}
	srcs := []Source{
		// lagging: applied a prefix only
		history("lag", started, config(1, 1, "conf"), applied(2, 1, "a")),
		// restored from a snapshot at 3, then applied what follows
		history("snap", started, Record{Kind: KindRestored, Index: 3}, applied(5, 2, "c")),
		// restarted twice: applies everything again each time; once from a
		// snapshot at its applied index 2
		history("restart", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"),
			started, config(1, 1, "conf"), applied(2, 1, "a"),
			started, Record{Kind: KindRestored, Index: 2}, applied(3, 1, "b"), applied(5, 2, "c")),
		// ahead of the reference's commit index (5): 6 waits
		history("ahead", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"), applied(5, 2, "c"), applied(6, 2, "d")),
	}
	ck := NewChecker()
	if vs := check(t, ck, ref, false, srcs...); len(vs) != 0 {
		t.Fatalf("legal histories: %v", vs)
	}
	if st := ck.Stats(); st.Applied != 14 || st.Verified != 14 {
		t.Fatalf("stats %v: the record above the commit index must wait", st)
	}
	ref.Commit = 6
	if vs := check(t, ck, ref, true, srcs...); len(vs) != 0 {
		t.Fatalf("legal histories, final: %v", vs)
	}
	if st := ck.Stats(); st.Applied != 15 || st.Verified != 15 {
		t.Fatalf("stats %v after the final check", st)
	}
	t.Log(ck.Stats())
}

func TestCheckerNamesSkippedAndOutOfOrderEntries(t *testing.T) {
	ref := Reference{Name: "m1", Log: refLogOf(t, 1, committed...), Commit: 6}
	skip := history("m0", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(5, 2, "c"))
	back := history("m2", started, config(1, 1, "conf"), applied(3, 1, "b"), applied(2, 1, "a"))
	vs := check(t, NewChecker(), ref, false, skip, back)
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"member m0 skipped committed index 3 term 1",
		"member m2 skipped committed index 2 term 1",
		"member m2 applied index 2 term 1 after index 3 in the same run",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation %q in:\n%s", want, all)
		}
	}
	if len(vs) != 3 {
		t.Errorf("%d violations, want 3:\n%s", len(vs), all)
	}
	// The no-op at 4 is not skipped by applying 3 then 5.
	ok := history("m3", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"), applied(5, 2, "c"))
	if vs := check(t, NewChecker(), ref, false, ok); len(vs) != 0 {
		t.Fatal(vs)
	}
}

// Entries compacted on the reference are checked across members.
func TestCheckerCrossChecksCompactedEntries(t *testing.T) {
	ref := Reference{Name: "m1", Log: refLogOf(t, 4, committed[3:]...), Commit: 6}
	a := history("m0", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"), applied(5, 2, "c"))
	b := history("m2", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 2, "z"))
	ck := NewChecker()
	vs := check(t, ck, ref, false, a, b)
	if len(vs) != 1 || vs[0].Member != "m2" || vs[0].Other != "m0" || vs[0].Applied.Index != 3 {
		t.Fatalf("violations %v, want m2 and m0 disagreeing at 3", vs)
	}
	t.Log(vs[0])
	if st := ck.Stats(); st.CrossChecked != 3 || st.Unverifiable != 3 || st.Verified != 1 {
		t.Fatalf("stats %v", st)
	}
}

// In a final check nothing may have been applied beyond the final log; in
// a running check such a record waits.
func TestCheckerFinalBeyondTheLog(t *testing.T) {
	ref := Reference{Name: "m1", Log: refLogOf(t, 1, committed...), Commit: 6}
	h := history("m0", started, config(1, 1, "conf"), applied(2, 1, "a"), applied(3, 1, "b"), applied(5, 2, "c"), applied(6, 2, "d"), applied(7, 2, "e"))
	ck := NewChecker()
	if vs := check(t, ck, ref, false, h); len(vs) != 0 {
		t.Fatal(vs)
	}
	vs := check(t, ck, ref, true, h)
	if len(vs) != 1 || !strings.Contains(vs[0].String(), "member m0 applied index 7 term 2") || !strings.Contains(vs[0].String(), "beyond the committed log (it ends at 6 on m1)") {
		t.Fatalf("final: %v", vs)
	}
	r := history("m3", started, Record{Kind: KindRestored, Index: 9})
	if vs := check(t, ck, ref, true, r); len(vs) != 1 || !strings.Contains(vs[0].String(), "restored a snapshot at index 9, beyond") {
		t.Fatalf("restored beyond: %v", vs)
	}
}

// A history file written by a killed process (torn last record) is checked
// like a memory one: the stale entry is named, the torn record ignored.
func TestCheckerReadsHistoryFiles(t *testing.T) {
	ref := Reference{Name: "m1", Log: refLogOf(t, 1, committed...), Commit: 6}
	path := filepath.Join(t.TempDir(), FileName)
	f, err := OpenFile("m0", path, func(err error) { t.Errorf("write: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	f.Append([]Record{started, config(1, 1, "conf"), applied(2, 1, "a")})
	f.Append([]Record{applied(3, 1, "b"), applied(4, 1, "x")})
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, b[headerSize:headerSize+recordSize-1]...), 0o644); err != nil {
		t.Fatal(err)
	}
	vs := check(t, NewChecker(), ref, true, FileSource("m0", path))
	if len(vs) != 1 || vs[0].Member != "m0" || vs[0].Applied.Index != 4 || vs[0].Committed.Term != 2 {
		t.Fatalf("violations %v, want m0's stale index 4", vs)
	}
}
