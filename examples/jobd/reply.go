package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

// What a caller does about an unknown outcome (503 outcome_unknown), per
// route: each operation has its own way to find out.
const (
	adviceSubmit = "resubmit with the same job ID (and idempotency key): the job exists at most once, and the reply says whether it does"
	adviceClaim  = "jobs may have been leased by this claim; nobody holds those leases, and the jobs return to their queue when the leases expire: claim again"
	adviceSettle = "retry the same request (same token, same body): 200 means this request ended the lease; if the retry is refused with 409 the lease has ended otherwise (or the job has ended a later lease since); GET the job to see its state"
	adviceExtend = "retry with the same token: extending twice is harmless"
	adviceCancel = "retry the cancel: a 409 invalid_state then means the job is finished or already canceled; GET the job to see which"
	adviceRetry  = "GET the job: it is pending (or running again) if the retry took effect"
	adviceOther  = "retry"
)

// classify maps an error to an HTTP status, a machine-readable kind and a
// reason. Every 4xx means nothing changed. advice is the route's advice for
// an unknown outcome ("" for routes that change nothing).
func classify(err error, advice string) (int, string, string) {
	var ce *clientError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body above %d bytes", mbe.Limit)
	case errors.As(err, &ce):
		return ce.code, ce.kind, ce.reason
	case errors.Is(err, jobraft.ErrMayExist), errors.Is(err, jobraft.ErrOutcomeUnknown), errors.Is(err, raft.ErrIndeterminate):
		// "It may have happened" is checked first: never a 4xx, whatever
		// else it matches (the controller's errors match exactly one
		// outcome class; this order keeps the rule even if one did not).
		if advice == "" {
			advice = adviceOther
		}
		var se *jobraft.SubmitError
		if errors.As(err, &se) && se.ID != "" {
			advice = fmt.Sprintf("resubmit with job ID %q (and the same idempotency key): the job exists at most once, and the reply says whether it does", se.ID)
		}
		return http.StatusServiceUnavailable, "outcome_unknown", err.Error() + " (" + advice + ")"
	case scheduleRefusal(err) != nil: // api_schedules.go
		r := scheduleRefusal(err)
		return r.code, r.kind, detail(err, r.class)
	case errors.Is(err, jobraft.ErrInvalidRequest):
		return http.StatusBadRequest, "invalid", detail(err, jobraft.ErrInvalidRequest)
	case errors.Is(err, jobraft.ErrNotFound):
		// "job not found: \"x\"": the detail alone is only the ID.
		return http.StatusNotFound, "not_found", strings.TrimPrefix(err.Error(), "jobraft: ")
	case errors.Is(err, jobraft.ErrStaleLease):
		return http.StatusConflict, "stale_lease", detail(err, jobraft.ErrStaleLease)
	case errors.Is(err, jobraft.ErrInvalidState):
		return http.StatusConflict, "invalid_state", detail(err, jobraft.ErrInvalidState)
	case errors.Is(err, jobraft.ErrQueuePaused):
		return http.StatusConflict, "queue_paused", detail(err, jobraft.ErrQueuePaused)
	case errors.Is(err, jobraft.ErrBatchExists):
		return http.StatusConflict, "batch_exists", detail(err, jobraft.ErrBatchExists)
	case errors.Is(err, jobraft.ErrCompacted):
		return http.StatusGone, "compacted", err.Error()
	case errors.Is(err, jobraft.ErrNotSubmitted):
		return http.StatusServiceUnavailable, "not_submitted", err.Error() + " (nothing was created; retry)"
	case errors.Is(err, jobraft.ErrNotApplied):
		return http.StatusServiceUnavailable, "not_applied", err.Error() + " (nothing changed; retry)"
	case errors.Is(err, jobraft.ErrNoLeader):
		// A read (or a membership change) that reached no leader within
		// -leader-wait; the reason says how many voters are reachable.
		return http.StatusServiceUnavailable, "no_leader", err.Error() + " (nothing changed; retry)"
	case errors.Is(err, jobraft.ErrClosed):
		return http.StatusServiceUnavailable, "closed", err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout", err.Error()
	}
	return http.StatusInternalServerError, "internal", err.Error()
}

// detail is a refusal's reason: the library's text without its class
// ("jobraft: invalid job state for operation: "), which the reply's kind
// already names, so the reason is the most specific message ("cannot
// cancel canceled job ...").
func detail(err, class error) string {
	if rest, ok := strings.CutPrefix(err.Error(), class.Error()+": "); ok && rest != "" {
		return rest
	}
	return err.Error()
}

// leaderRef is how raft.ProposeError names the leader it tried: its ID when
// the proposal was local, its address when it was forwarded.
var leaderRef = regexp.MustCompile(`\(leader "([^"]*)"\)`)

// nameLeaders rewrites each leader reference in text as "ID (address)",
// looked up in members, whichever of the two the error carried.
func nameLeaders(text string, members []raft.Member) string {
	return leaderRef.ReplaceAllStringFunc(text, func(ref string) string {
		who := leaderRef.FindStringSubmatch(ref)[1]
		if who == "" {
			return "(no leader known)"
		}
		for _, m := range members {
			if who == m.ID || who == m.Address {
				return fmt.Sprintf("(leader %s (%s))", m.ID, m.Address)
			}
		}
		return ref
	})
}

// divergedReason is readyz's reason for a diverged member, naming the
// leader as every error reply does: "ID (address)".
func divergedReason(d raft.Divergence, members []raft.Member) string {
	return nameLeaders(fmt.Sprintf("diverged from the leader's log at index %d (leader %q) (local term %d, leader term %d); re-seed this member",
		d.Index, d.Leader, d.LocalTerm, d.LeaderTerm), members)
}
