package jobraft_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// TestSubmitRefusesOutOfRangeAndContradictoryRequests: a negative delay, a
// delay above fsm.MaxDelay, a delay together with RunAt, and an ID that is
// not UTF-8 text without control characters are refused (ErrInvalidRequest,
// ErrNotSubmitted) and create nothing; they used to be dropped or changed
// silently.
func TestSubmitRefusesOutOfRangeAndContradictoryRequests(t *testing.T) {
	c := clustertest.StartCtls(t, 1, nil)
	ctl := c.Ctls[c.WaitLeader(10*time.Second)]
	ctx := clustertest.Ctx(t, 10*time.Second)
	base := jobraft.SubmitRequest{Queue: "q", Kind: "k"}
	for _, tc := range []struct {
		name string
		edit func(*jobraft.SubmitRequest)
	}{
		{"negative delay", func(r *jobraft.SubmitRequest) { r.Delay = -time.Second }},
		{"delay above MaxDelay", func(r *jobraft.SubmitRequest) { r.Delay = 400 * 24 * time.Hour }},
		{"delay and run-at", func(r *jobraft.SubmitRequest) { r.Delay, r.RunAt = time.Second, time.Now().Add(time.Hour) }},
		{"id with NUL", func(r *jobraft.SubmitRequest) { r.ID = "a\x00b" }},
		{"id with CR LF", func(r *jobraft.SubmitRequest) { r.ID = "a\r\nb" }},
		{"id with DEL", func(r *jobraft.SubmitRequest) { r.ID = "a\x7fb" }},
		{"id with a C1 control", func(r *jobraft.SubmitRequest) { r.ID = "a\u0085b" }},
		{"id not UTF-8", func(r *jobraft.SubmitRequest) { r.ID = "a\xffb" }},
	} {
		req := base
		req.ID = "j-" + tc.name
		tc.edit(&req)
		_, err := ctl.Submit(ctx, req)
		if !errors.Is(err, jobraft.ErrInvalidRequest) || !errors.Is(err, jobraft.ErrNotSubmitted) {
			t.Errorf("%s: %v, want ErrInvalidRequest and ErrNotSubmitted", tc.name, err)
			continue
		}
		if _, err := ctl.Get(ctx, req.ID, jobraft.Linearizable); !errors.Is(err, jobraft.ErrNotFound) {
			t.Errorf("%s: the refused job exists: %v", tc.name, err)
		}
	}
	// Still accepted: a delay alone, RunAt alone, a non-ASCII ID.
	for _, req := range []jobraft.SubmitRequest{
		{ID: "delayed", Queue: "q", Kind: "k", Delay: time.Minute},
		{ID: "run-at", Queue: "q", Kind: "k", RunAt: time.Now().Add(time.Minute)},
		{ID: "café/1", Queue: "q", Kind: "k"},
	} {
		if _, err := ctl.Submit(ctx, req); err != nil {
			t.Errorf("%q: %v", req.ID, err)
		}
	}
}
