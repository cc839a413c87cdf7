package watchlog

import "slices"

// Turn is a waiting claim's share of the jobs an applied entry made
// claimable: N jobs of Queue and Kind. A claim woken with turns that
// does not take those jobs hands the turns on (Recorder.Pass), so the
// next waiting claim gets them.
type Turn struct {
	Queue, Kind string
	N           int
	// Passed: handed on by a claim whose proposal came back empty (the
	// job was taken by another claimant, or is not due by the leader's
	// clock); a claim that comes back empty again drops it.
	Passed bool
}

// Claimer is a claim waiting on this member for a claimable job
// (Recorder.WaitClaim). Its fields are guarded by the Recorder's mutex.
type Claimer struct {
	queues, kinds []string
	max           int
	woken         chan struct{} // closed when woken
	waiting       bool          // in the recorder's lists
	proposing     bool          // its claim is being proposed: last in line
	turns         []Turn        // given since the last Withdraw or Proposing
}

// Woken returns the channel closed when the claimer is woken: with turns
// (jobs of its queues and kinds became claimable), or by a change whose
// jobs are not counted (a nak, a retry, an expiry, a resume, a restore),
// which wakes every waiting claim.
func (w *Claimer) Woken() <-chan struct{} { return w.woken }

// WaitClaim registers a claim of up to most jobs of queues, limited to
// kinds (none: any), as waiting, last in line, and returns it. Register
// before checking the state: a job made claimable after the check wakes
// the claimer (or, when claims registered earlier take it, one of them).
//
// Jobs an entry makes claimable are counted per queue and kind (submits)
// and handed to waiting claims first in line that match, each as many as
// its most, so an entry wakes as many claims as it brought jobs for; other
// changes wake every waiting claim.
func (r *Recorder) WaitClaim(queues, kinds []string, most int) *Claimer {
	w := &Claimer{queues: queues, kinds: kinds, max: max(most, 1)}
	r.Rewait(w)
	return w
}

// Rewait registers w, once woken, as waiting again, last in line, with a
// new Woken channel (a claimer still waiting stays as it is).
func (r *Recorder) Rewait(w *Claimer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.waiting {
		return
	}
	w.woken = make(chan struct{})
	w.waiting, w.proposing = true, false
	for i, q := range w.queues {
		if slices.Contains(w.queues[:i], q) {
			continue
		}
		r.claimers[q] = append(r.claimers[q], w)
	}
}

// Withdraw ends w's wait, if it still waits, and returns the turns it was
// woken with since the last Withdraw: the caller now owes them a claim, or
// hands them on (Pass).
func (r *Recorder) Withdraw(w *Claimer) []Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.waiting {
		r.unlistLocked(w)
	}
	t := w.turns
	w.turns = nil
	return t
}

// Proposing marks waiting claim w as proposing its claim, and returns the
// turns it was woken with since the last Withdraw or Proposing (the claim
// it proposes owes them). While it proposes it stays registered, but last
// in line: turns go to the claims idle in line first, and reach it (waking
// it) only when none of them has room, so that a claim that comes back
// empty does not sleep past a job made claimable meanwhile. Idle puts it
// back in line.
func (r *Recorder) Proposing(w *Claimer) []Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.proposing = true
	t := w.turns
	w.turns = nil
	return t
}

// Idle ends Proposing: w, if still waiting, takes its place in line again.
func (r *Recorder) Idle(w *Claimer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.proposing = false
}

// Pass hands turns on to the claims waiting in line, as if their jobs
// had just become claimable.
func (r *Recorder) Pass(turns []Turn) {
	if len(turns) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.giveLocked(turns)
}

// giveLocked hands each turn's jobs to the waiting claims of its queue
// that match its kind, first in line first (those proposing last), each up
// to its max, and wakes them. Turns no claim waits for are dropped: a
// claim that registers later checks the state after registering. mu held.
func (r *Recorder) giveLocked(turns []Turn) {
	var woken []*Claimer
	for _, t := range turns {
		ws := r.claimers[t.Queue]
		for i := 0; i < 2*len(ws) && t.N > 0; i++ {
			w := ws[i%len(ws)]
			if w.proposing != (i >= len(ws)) || (len(w.kinds) > 0 && !slices.Contains(w.kinds, t.Kind)) {
				continue
			}
			held := 0
			for _, h := range w.turns {
				held += h.N
			}
			n := min(t.N, w.max-held)
			if n <= 0 {
				continue
			}
			if held == 0 {
				woken = append(woken, w)
			}
			w.turns = append(w.turns, Turn{Queue: t.Queue, Kind: t.Kind, N: n, Passed: t.Passed})
			t.N -= n
		}
	}
	for _, w := range woken {
		r.unlistLocked(w)
		close(w.woken)
	}
}

// wakeAllLocked wakes every waiting claim (without turns). mu held.
func (r *Recorder) wakeAllLocked() {
	for q, ws := range r.claimers {
		for _, w := range ws {
			if w.waiting {
				w.waiting = false
				close(w.woken)
			}
		}
		delete(r.claimers, q)
	}
}

// unlistLocked removes w from the lists of its queues. mu held.
func (r *Recorder) unlistLocked(w *Claimer) {
	w.waiting = false
	for _, q := range w.queues {
		ws := r.claimers[q]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
		}
		if len(ws) == 0 {
			delete(r.claimers, q)
		} else {
			r.claimers[q] = ws
		}
	}
}

// Claiming is the number of claims waiting on this member.
func (r *Recorder) Claiming() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[*Claimer]bool{}
	for _, ws := range r.claimers {
		for _, w := range ws {
			seen[w] = true
		}
	}
	return len(seen)
}
