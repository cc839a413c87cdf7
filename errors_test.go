package jobraft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/raft"
)

// classesOf lists the operation outcome classes err matches.
func classesOf(err error) []error {
	var out []error
	for _, c := range opClasses {
		if errors.Is(err, c) {
			out = append(out, c)
		}
	}
	return out
}

// TestOutcomeClassesExclusive: every error an operation can return is of
// exactly one outcome class, keeps its cause matchable when the cause is
// of no other class, and quotes it otherwise.
func TestOutcomeClassesExclusive(t *testing.T) {
	fsmErr := func(c fsm.Code) error { return (&fsm.Result{Code: c, Detail: "detail"}).Err() }
	unknown := classify(&raft.ProposeError{Class: raft.ErrIndeterminate, Leader: "m1", Cause: errors.New("leadership lost")})
	stale := classify(fsmErr(fsm.CodeStaleLease))
	rejected := classify(&raft.ProposeError{Class: raft.ErrRejected, Cause: raft.ErrNoLeader})
	_, encErr := fsm.EncodeCommand(&fsm.AckCmd{ID: ""})

	type tc struct {
		name  string
		err   error
		class error
		cause error // must still match (nil: none to check)
	}
	cases := []tc{
		{"stale", stale, ErrStaleLease, fsm.ErrStaleLease},
		{"not found", classify(fsmErr(fsm.CodeNotFound)), ErrNotFound, fsm.ErrNotFound},
		{"invalid state", classify(fsmErr(fsm.CodeInvalidState)), ErrInvalidState, fsm.ErrInvalidState},
		{"queue paused", classify(fsmErr(fsm.CodeQueuePaused)), ErrQueuePaused, fsm.ErrQueuePaused},
		{"invalid command", classify(fsmErr(fsm.CodeInvalidCommand)), ErrInvalidRequest, fsm.ErrInvalidCommand},
		{"too large", classify(fsmErr(fsm.CodeTooLarge)), ErrInvalidRequest, fsm.ErrTooLarge},
		{"unknown command", classify(fsmErr(fsm.CodeUnknownCommand)), ErrInvalidRequest, fsm.ErrUnknownCommand},
		{"unsupported version", classify(fsmErr(fsm.CodeUnsupportedVersion)), ErrInvalidRequest, fsm.ErrUnsupportedVersion},
		{"index not increasing", classify(fsmErr(fsm.CodeIndexNotIncreasing)), ErrNotApplied, fsm.ErrIndexNotIncreasing},
		{"encode", classify(encErr), ErrInvalidRequest, fsm.ErrInvalidCommand},
		{"rejected", rejected, ErrNotApplied, raft.ErrRejected},
		{"rejected too large", classify(&raft.ProposeError{Class: raft.ErrRejected, Cause: raft.ErrTooLarge}), ErrInvalidRequest, raft.ErrTooLarge},
		{"rejected closed", classify(&raft.ProposeError{Class: raft.ErrRejected, Cause: raft.ErrClosed}), ErrClosed, raft.ErrClosed},
		{"indeterminate", unknown, ErrOutcomeUnknown, raft.ErrIndeterminate},
		{"context canceled", classify(context.Canceled), ErrNotApplied, context.Canceled},
		{"deadline", classify(fmt.Errorf("wait: %w", context.DeadlineExceeded)), ErrNotApplied, context.DeadlineExceeded},
		{"closed", classify(ErrClosed), ErrClosed, nil},
		{"closed wrapped", classify(fmt.Errorf("x: %w", ErrClosed)), ErrClosed, nil},
		{"undecodable result", classify(fmt.Errorf("jobraft: result of entry 7: %w", fsm.ErrInvalidResult)), ErrOutcomeUnknown, fsm.ErrInvalidResult},
		{"unclassified", classify(errors.New("raft: committed entry 9 not applied")), ErrOutcomeUnknown, nil},
		{"classified twice", classify(classify(stale)), ErrStaleLease, fsm.ErrStaleLease},
	}
	// After an unknown attempt, whatever the last attempt says.
	for _, last := range []error{stale, rejected, classify(fsmErr(fsm.CodeNotFound)), classify(fsmErr(fsm.CodeInvalidState)),
		classify(ErrClosed), classify(context.Canceled), unknown, nil} {
		cases = append(cases, tc{fmt.Sprintf("unknown then %v", last), unknownOutcome(unknown, last), ErrOutcomeUnknown, raft.ErrIndeterminate})
	}
	// Unknown from an attempt that was not a raft indeterminate.
	cases = append(cases, tc{"unknown from a decode failure", unknownOutcome(classify(fmt.Errorf("x: %w", fsm.ErrInvalidResult)), stale), ErrOutcomeUnknown, fsm.ErrInvalidResult})

	for _, c := range cases {
		got := classesOf(c.err)
		if len(got) != 1 || got[0] != c.class {
			t.Errorf("%s: %v matches %v, want only %v", c.name, c.err, got, c.class)
			continue
		}
		if c.cause != nil && !errors.Is(c.err, c.cause) {
			t.Errorf("%s: %v does not match its cause %v", c.name, c.err, c.cause)
		}
		if c.class == ErrOutcomeUnknown {
			if !errors.Is(c.err, raft.ErrIndeterminate) || errors.Is(c.err, raft.ErrRejected) {
				t.Errorf("%s: %v: unknown must match raft.ErrIndeterminate and not raft.ErrRejected", c.name, c.err)
			}
			if errors.Is(c.err, fsm.ErrStaleLease) || errors.Is(c.err, context.Canceled) {
				t.Errorf("%s: %v: the last attempt's cause is matchable", c.name, c.err)
			}
		}
	}
	// The last attempt is still told.
	if msg := unknownOutcome(unknown, stale).Error(); !strings.Contains(msg, "stale lease") || !strings.Contains(msg, "leadership lost") {
		t.Errorf("unknown then stale: message %q lost a cause", msg)
	}
	// Every fsm code is covered by the table's mapping.
	for c := fsm.Code(1); !errors.Is(c.Err(), fsm.ErrInvalidResult); c++ {
		if got := classesOf(classify(c.Err())); len(got) != 1 || got[0] == ErrOutcomeUnknown {
			t.Errorf("fsm code %v: classes %v, want one refusal class", c, got)
		}
	}
}

// TestErrorTextsNameTheClassOnce: an fsm refusal classed by the controller
// reads "jobraft: <class>: <detail>": one prefix, the class said once, the
// refusal's own detail last; the class and the fsm sentinel still match.
func TestErrorTextsNameTheClassOnce(t *testing.T) {
	refusal := func(c fsm.Code, detail string) error { return (&fsm.Result{Code: c, Detail: detail}).Err() }
	cases := []struct {
		err         error
		want        string
		class, fsmE error
	}{
		{classify(refusal(fsm.CodeInvalidState, `cannot cancel canceled job "a2"`)),
			`jobraft: invalid job state for operation: cannot cancel canceled job "a2"`, ErrInvalidState, fsm.ErrInvalidState},
		{classify(refusal(fsm.CodeStaleLease, `job "a" lease 12 ended: acked`)),
			`jobraft: stale lease: job "a" lease 12 ended: acked`, ErrStaleLease, fsm.ErrStaleLease},
		{classify(refusal(fsm.CodeNotFound, `job "x"`)), `jobraft: job not found: job "x"`, ErrNotFound, fsm.ErrNotFound},
		{classify(refusal(fsm.CodeQueuePaused, `every queue claimed is paused`)),
			`jobraft: queue paused: every queue claimed is paused`, ErrQueuePaused, fsm.ErrQueuePaused},
		{classify(refusal(fsm.CodeInvalidCommand, `empty queue`)), `jobraft: invalid request: empty queue`, ErrInvalidRequest, fsm.ErrInvalidCommand},
		{classify(refusal(fsm.CodeTooLarge, `payload of 9 bytes (max 8)`)),
			`jobraft: invalid request: too large: payload of 9 bytes (max 8)`, ErrInvalidRequest, fsm.ErrTooLarge},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("text %q, want %q", got, c.want)
		}
		if !errors.Is(c.err, c.class) || !errors.Is(c.err, c.fsmE) {
			t.Errorf("%q: errors.Is(class %v) = %v, errors.Is(fsm %v) = %v; want both", c.err, c.class, errors.Is(c.err, c.class), c.fsmE, errors.Is(c.err, c.fsmE))
		}
		if strings.Count(c.err.Error(), "fsm: ") > 0 || strings.Count(c.err.Error(), "jobraft: ") != 1 {
			t.Errorf("%q: more than one prefix", c.err)
		}
	}
}
