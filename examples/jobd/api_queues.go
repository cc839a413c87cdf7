package main

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// POST /v1/queues/{queue}/pause and /resume: stop (or restart) claims from
// a queue; submits are still accepted. Both are idempotent: pausing a
// paused queue succeeds and changes nothing.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, true)
}

func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, false)
}

// pathQueue is the request's {queue}, checked.
func pathQueue(r *http.Request) (string, error) {
	q := r.PathValue("queue")
	if q == "" || len(q) > fsm.MaxIDLen {
		return "", bad("queue name of %d bytes: 1..%d", len(q), fsm.MaxIDLen)
	}
	if !utf8.ValidString(q) || strings.ContainsFunc(q, unicode.IsControl) {
		return "", bad("queue name: UTF-8 text without control characters")
	}
	return q, nil
}

func (s *server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	q, err := pathQueue(r)
	if err != nil {
		return err
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		return err
	}
	op := s.ctl.Resume
	if paused {
		op = s.ctl.Pause
	}
	if err := op(r.Context(), q); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, client.QueueState{Paused: paused, Queue: q})
	return nil
}
