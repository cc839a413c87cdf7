package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/fsm"
)

// Dependencies and batches (docs/dependencies.md): a submitted job's
// parents (after, on_parent_failure: checked in request), POST
// /v1/batches, GET /v1/batches[/{id}], GET /v1/jobs/{id}/dependents.

// parents checks a submitted job's parents and policy.
func parents(j *client.SubmitRequest) ([]string, jobraft.ParentPolicy, error) {
	if len(j.After) > fsm.MaxParents {
		return nil, 0, bad("after: %d parents, at most %d", len(j.After), fsm.MaxParents)
	}
	for i, p := range j.After {
		if err := checkJobID(p); err != nil {
			return nil, 0, bad("after[%d]: %v", i, err)
		}
	}
	switch j.OnParentFailure {
	case "", "cancel":
		return j.After, jobraft.ParentFailCancel, nil
	case "dead":
		if len(j.After) == 0 {
			return nil, 0, bad("on_parent_failure without after")
		}
		return j.After, jobraft.ParentFailDead, nil
	}
	return nil, 0, bad("on_parent_failure %q: cancel or dead", j.OnParentFailure)
}

// POST /v1/batches {"id", "jobs": [...], "completion": {...}}: 201 with
// the batch and each job's outcome (207 when one failed); 409
// batch_exists when another request created a batch of that ID. A
// malformed request is refused whole (400).
func (s *server) createBatch(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID         string       `json:"id"`
		Jobs       []submitJSON `json:"jobs"`
		Completion *submitJSON  `json:"completion"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if err := checkJobID(in.ID); err != nil || len(in.ID) > fsm.MaxNameLen {
		return bad("id: a batch ID of 1..%d bytes of A-Z a-z 0-9 . _ : -", fsm.MaxNameLen)
	}
	if len(in.Jobs) > maxBatch {
		return bad("jobs: at most %d per batch, got %d", maxBatch, len(in.Jobs))
	}
	now := time.Now()
	req := jobraft.BatchRequest{ID: in.ID, Jobs: make([]jobraft.SubmitRequest, len(in.Jobs))}
	for i := range in.Jobs {
		var err error
		if req.Jobs[i], err = in.Jobs[i].request(now); err != nil {
			return bad("jobs[%d]: %v", i, err)
		}
	}
	if in.Completion != nil {
		if len(in.Completion.After) > 0 {
			return bad("completion: a completion job names no parents")
		}
		c, err := in.Completion.request(now)
		if err != nil {
			return bad("completion: %v", err)
		}
		req.Completion = &c
	}
	res, err := s.ctl.CreateBatch(r.Context(), req)
	if err != nil {
		return err
	}
	out := client.BatchCreated{Batch: batchOf(res.Batch), Results: make([]client.Submitted, len(res.Jobs))}
	code := http.StatusCreated
	for i, x := range res.Jobs {
		out.Results[i] = client.Submitted{Job: jobOf(x.Job), Duplicate: x.Duplicate}
		if x.Err != nil {
			_, out.Results[i].Error, out.Results[i].Reason = classify(x.Err, adviceSubmit)
			code = http.StatusMultiStatus
		}
	}
	writeJSON(w, code, out)
	return nil
}

// GET /v1/batches/{id}
func (s *server) getBatch(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkJobID(id); err != nil {
		return err
	}
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	b, err := s.ctl.Batch(r.Context(), id, cons)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, batchOf(b))
	return nil
}

// GET /v1/batches?after=ID&limit=N: batches in ID order.
func (s *server) listBatches(w http.ResponseWriter, r *http.Request) error {
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	limit := 0
	if l := r.URL.Query().Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > fsm.MaxListLimit {
			return bad("limit must be 1..%d", fsm.MaxListLimit)
		}
	}
	bs, err := s.ctl.Batches(r.Context(), r.URL.Query().Get("after"), limit, cons)
	if err != nil {
		return err
	}
	out := struct {
		Batches []client.Batch `json:"batches"`
	}{Batches: []client.Batch{}}
	for _, b := range bs {
		out.Batches = append(out.Batches, batchOf(b))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// GET /v1/jobs/{id}/dependents: the IDs of the jobs naming it a parent.
func (s *server) dependents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	cons, err := consistency(r)
	if err != nil {
		return err
	}
	ids, err := s.ctl.Dependents(r.Context(), id, cons)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Dependents []string `json:"dependents"`
	}{append([]string{}, ids...)})
	return nil
}

func batchOf(b jobraft.BatchInfo) client.Batch {
	out := client.Batch{ID: b.ID, Created: b.Created, Members: b.Members, Counts: map[string]int{},
		Succeeded: b.Counts.Succeeded, Failed: b.Failed(), Done: b.Done, CompletionJob: b.CompletionJob}
	for st := jobraft.StatePending; st.Valid(); st++ {
		if n := b.Counts.Of(st); n > 0 {
			out.Counts[st.String()] = n
		}
	}
	if b.Done {
		t := b.Completed
		out.Completed = &t
	}
	return out
}
