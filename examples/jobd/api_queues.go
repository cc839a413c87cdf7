package main

import (
	"net/http"

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

func (s *server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	q := r.PathValue("queue")
	if q == "" || len(q) > fsm.MaxIDLen {
		return bad("queue name of %d bytes: 1..%d", len(q), fsm.MaxIDLen)
	}
	for i := 0; i < len(q); i++ {
		if !idByte(q[i]) {
			return bad("queue %q: byte %d (%q) is outside A-Z a-z 0-9 . _ : -", q, i, q[i])
		}
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
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "paused": paused})
	return nil
}
