package wal

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// replaceCase is a conflict truncation at `at` followed by an append of
// entries, on the log of replaceLog (indexes 1..6, terms 1 1 2 2 3 3,
// commit floor 2).
type replaceCase struct {
	name         string
	at           uint64
	entries      []*raft.Log
	requireStamp bool
	want         error // nil: both steps accepted
	after        Shape // shape after the truncation, when it is allowed
}

var replaceTerms = []uint64{1, 1, 2, 2, 3, 3}

const replaceFloor = 2

func replaceCases() []replaceCase {
	altered := stamped(5, 4, "body")
	altered.Data = []byte("other")
	noop := &raft.Log{Index: 5, Term: 4, Type: raft.LogNoop}
	cut5 := Shape{First: 1, Last: 4, LastTerm: 2, Floor: replaceFloor}
	empty := Shape{Floor: replaceFloor}
	whole := Shape{First: 1, Last: 6, LastTerm: 3, Floor: replaceFloor}
	return []replaceCase{
		{name: "truncation then a valid batch", at: 5, requireStamp: true, after: cut5,
			entries: []*raft.Log{stamped(5, 4, "a"), stamped(6, 4, "b"), stamped(7, 4, "c")}},
		{name: "truncation then raft's own unstamped no-op", at: 5, requireStamp: true, after: cut5,
			entries: []*raft.Log{noop}},
		{name: "truncation then an unstamped command", at: 5, requireStamp: true, after: cut5, want: ErrUnstamped,
			entries: []*raft.Log{entry(5, 4, "x")}},
		{name: "unstamped command without RequireStamp", at: 5, after: cut5,
			entries: []*raft.Log{entry(5, 4, "x")}},
		{name: "truncation then a stamp mismatch", at: 5, requireStamp: true, after: cut5, want: ErrPayloadMismatch,
			entries: []*raft.Log{altered}},
		{name: "stamp mismatch later in the batch", at: 5, requireStamp: true, after: cut5, want: ErrPayloadMismatch,
			entries: []*raft.Log{stamped(5, 4, "a"), altered2(6, 4)}},
		{name: "truncation then a gap", at: 5, requireStamp: true, after: cut5, want: ErrNotContiguous,
			entries: []*raft.Log{stamped(6, 4, "a")}},
		{name: "gap inside the batch", at: 5, requireStamp: true, after: cut5, want: ErrNotContiguous,
			entries: []*raft.Log{stamped(5, 4, "a"), stamped(7, 4, "b")}},
		{name: "term below the entry before the cut", at: 5, requireStamp: true, after: cut5, want: ErrTermRegression,
			entries: []*raft.Log{stamped(5, 1, "a")}},
		{name: "zero term", at: 5, requireStamp: true, after: cut5, want: ErrZeroTerm,
			entries: []*raft.Log{stamped(5, 0, "a")}},
		{name: "truncation at the floor", at: 2, requireStamp: true, want: ErrCommittedTruncate,
			entries: []*raft.Log{stamped(2, 4, "a")}},
		{name: "truncation just above the floor", at: 3, requireStamp: true,
			after:   Shape{First: 1, Last: 2, LastTerm: 1, Floor: replaceFloor},
			entries: []*raft.Log{stamped(3, 4, "a")}},
		{name: "conflict at the first index: a reset, then an entry at the floor", at: 1, requireStamp: true,
			after: empty, want: ErrNotContiguous, entries: []*raft.Log{stamped(1, 4, "a")}},
		{name: "no truncation: past the last index", at: 7, requireStamp: true, after: whole,
			entries: []*raft.Log{stamped(7, 4, "a")}},
	}
}

func altered2(i, term uint64) *raft.Log {
	e := stamped(i, term, "body")
	e.Data = nil // the lost-payload shape: a stamp saying 4 bytes, no body
	return e
}

// The pure check: the shape after the truncation, and the batch decided on
// it, as the table says.
func TestCheckAppendAfterTruncate(t *testing.T) {
	s := Shape{First: 1, Last: 6, LastTerm: 3, Floor: replaceFloor}
	for _, tc := range replaceCases() {
		t.Run(tc.name, func(t *testing.T) {
			var termBefore uint64
			if tc.at >= 2 && tc.at-1 <= uint64(len(replaceTerms)) {
				termBefore = replaceTerms[tc.at-2]
			}
			after, err := AfterTruncate(s, tc.at, termBefore)
			if err == nil {
				if after != tc.after {
					t.Fatalf("after the truncation at %d: %+v, want %+v", tc.at, after, tc.after)
				}
				err = CheckAppend(after, tc.entries, tc.requireStamp)
			}
			checkRefusal(t, err, tc.want)
		})
	}
}

// CheckReplace on a real log agrees with what DeleteRange then StoreLogs
// do on an identical one, reports its refusal like they do, and changes
// nothing.
func TestCheckReplaceAgreesWithTheLog(t *testing.T) {
	for _, tc := range replaceCases() {
		t.Run(tc.name, func(t *testing.T) {
			var checked, done []error
			checkLog := replaceLog(t, tc.requireStamp, &checked)
			doLog := replaceLog(t, tc.requireStamp, &done)

			got := checkLog.CheckReplace(tc.at, tc.entries)
			checkRefusal(t, got, tc.want)
			if first, last := bounds(t, checkLog); first != 1 || last != 6 {
				t.Fatalf("CheckReplace changed the log to [%d,%d]", first, last)
			}
			if tc.want == nil && len(checked) != 0 || tc.want != nil && len(checked) != 1 {
				t.Fatalf("CheckReplace reported %d refusals, want %v", len(checked), tc.want)
			}
			if tc.want != nil {
				var ge *GuardError
				if !errors.As(checked[0], &ge) || ge.Detail == "" {
					t.Fatalf("reported refusal %v has no diagnostic", checked[0])
				}
			}

			var err error
			if tc.at <= 6 { // raft truncates only at a conflict inside the log
				err = doLog.DeleteRange(tc.at, 6)
			}
			if err == nil {
				err = doLog.StoreLogs(tc.entries)
			}
			if !sameRefusal(got, err) {
				t.Fatalf("CheckReplace says %v, DeleteRange+StoreLogs say %v", got, err)
			}
			if len(done) != len(checked) {
				t.Fatalf("the operations reported %d refusals, CheckReplace %d", len(done), len(checked))
			}
		})
	}
}

// CheckReplace on a closed log says so and reports no refusal.
func TestCheckReplaceClosed(t *testing.T) {
	var reported []error
	l := replaceLog(t, true, &reported)
	l.Close()
	if err := l.CheckReplace(5, []*raft.Log{stamped(5, 4, "a")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	if len(reported) != 0 {
		t.Fatalf("reported %v", reported)
	}
}

func replaceLog(t *testing.T, requireStamp bool, reported *[]error) *Log {
	t.Helper()
	opts := []Option{OnRefusal(func(err error) { *reported = append(*reported, err) })}
	if requireStamp {
		opts = append(opts, RequireStamp())
	}
	l, err := Open(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i, term := range replaceTerms {
		mustStore(t, l, stamped(uint64(i+1), term, "entry"))
	}
	l.SetCommitFloor(func() uint64 { return replaceFloor })
	return l
}

func bounds(t *testing.T, l *Log) (uint64, uint64) {
	t.Helper()
	first, err := l.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	return first, lastIndex(t, l)
}

func checkRefusal(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	guardErr(t, err, want)
}

// sameRefusal reports whether a and b are both nil or the same guard
// refusal (sentinel, index, term).
func sameRefusal(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ga, gb *GuardError
	if !errors.As(a, &ga) || !errors.As(b, &gb) {
		return false
	}
	return ga.Err == gb.Err && ga.Index == gb.Index && ga.Term == gb.Term
}
