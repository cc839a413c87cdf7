package chaos

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/snapshot"
)

// loss is a power loss that took effect: member m lost its power at at,
// having reported applied (the latest status round it answered) and
// keeping, on disk, its log up to last and its newest snapshot at snap.
type loss struct {
	m                   int
	at                  time.Duration
	applied, last, snap uint64
}

// powerLoss cuts member m's power (clustertest.CtlProcs.PowerLoss): its log goes
// back to what it had fsynced, the process dies at once, and it restarts
// at the end of the span, as after a kill. A power loss that did not take
// effect as modelled is noted (the member was killed, or runs on until the
// end of the span restarts it). One that did is judged at once: the
// member keeps every entry it had applied (powerlossKept).
func (r *runner) powerLoss(m int) {
	r.setDown(m, true) // its death is the fault's, not an exit of its own
	r.mu.Lock()
	since := r.started[m]
	r.mu.Unlock()
	seen := r.obs.lastSample(m, since) // of this process: a lie's restart may have lost what an earlier one applied
	undid, err := r.p.PowerLoss(m)
	if err != nil {
		r.note(m, "powerloss: %v", err)
		return
	}
	l := loss{m: m, at: r.since().Round(time.Millisecond), applied: seen.Applied}
	sh, err := r.p.LogShapeOf(m)
	if err == nil {
		l.last = sh.Last
		l.snap, err = newestSnapshot(r.p.Cfgs[m].DataDir)
	}
	if err != nil {
		r.note(m, "powerloss: power lost (undid %d bytes in %d files, %d names); its log or snapshots unreadable now: %v", undid.Bytes, undid.Files, undid.Entries, err)
		l.last, l.snap = 0, 0
	} else {
		r.note(m, "powerloss: power lost, undid %d bytes in %d files and %d names; its log on disk %s, its newest snapshot at %d (the last status round saw last %d, applied %d)",
			undid.Bytes, undid.Files, undid.Entries, sh, l.snap, seen.Last, seen.Applied)
	}
	r.mu.Lock()
	r.losses = append(r.losses, l)
	r.mu.Unlock()
	if v, ok := l.kept(); !ok {
		r.violate(v)
	}
}

// kept judges a power loss: every entry the member applied was durable on
// it (a follower fsyncs an entry before it answers for it; a leader
// applies only what is durable on its disk; a snapshot is fsynced before
// the log is compacted), so its log or its newest snapshot still reaches
// the applied index it reported before the loss.
func (l loss) kept() (Verdict, bool) {
	if max(l.last, l.snap) >= l.applied {
		return Verdict{}, true
	}
	return Verdict{Checker: "powerloss", At: l.at, Index: l.applied, Members: []int{l.m},
		Detail: fmt.Sprintf("m%d lost entries it had applied: it reported applied index %d before its power loss at %s, and after it its log on disk ends at %d, its newest snapshot at %d",
			l.m, l.applied, l.at, l.last, l.snap)}, false
}

// newestSnapshot returns the index of the newest snapshot published in a
// member's data dir (0: none). The member must be stopped.
func newestSnapshot(dataDir string) (uint64, error) {
	st, err := snapshot.Open(filepath.Join(dataDir, "snapshots"), snapshot.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		return 0, err
	}
	metas, err := st.List()
	if err != nil || len(metas) == 0 {
		return 0, err
	}
	return metas[0].Index, nil
}

// powerlossVerdict is the powerloss checker's verdict when no loss broke
// it (a loss that did is a violation recorded when it happened).
// r.mu held.
func (r *runner) powerlossVerdictLocked() Verdict {
	if len(r.losses) == 0 {
		return Verdict{Checker: "powerloss", OK: true, Detail: "no power loss took effect"}
	}
	d := fmt.Sprintf("%d power losses; each member kept every entry it had applied", len(r.losses))
	for _, l := range r.losses {
		d += fmt.Sprintf(" (m%d at %s: applied %d, log to %d, snapshot at %d)", l.m, l.at, l.applied, l.last, l.snap)
	}
	return Verdict{Checker: "powerloss", OK: true, Detail: d}
}
