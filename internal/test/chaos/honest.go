package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/walcompare"
)

// entryKey is what identifies an entry at an index: its term and the
// CRC32C of its data (an applied record's, a log view's).
type entryKey struct {
	term uint64
	crc  uint32
}

func (k entryKey) String() string { return fmt.Sprintf("term %d crc %08x", k.term, k.crc) }

// honest judges every member that never lied, in every run (docs/chaos.md,
// "A lying disk"):
//
//	(a) its applied history is one history across its lifetime and its
//	    restarts: never two different entries (term, CRC) at one index;
//	(b) where the cluster's final log (the final leader's log on disk, or
//	    where it compacted an index, what the final leader applied there)
//	    differs from what a live member applied, the member ended with
//	    Status.Diverged set, naming a leader, and its own log does not
//	    hold the cluster's entry there: it refused, said so, and did not
//	    converge onto the other history.
//
// It runs after walCompare stopped the members (it reads their files).
func (r *runner) honest() Verdict {
	n := r.s.Slots()
	_, _, lieRun := r.firstLie()
	applied := make([]map[uint64]entryKey, n)
	for i := 0; i < n; i++ {
		r.mu.Lock()
		lied := r.lied[i]
		r.mu.Unlock()
		if lied {
			continue
		}
		recs, err := r.historyOf(i)
		if err != nil {
			return Verdict{Checker: "honest", At: r.since(), Members: []int{i}, Detail: fmt.Sprintf("m%d: applied history: %v", i, err)}
		}
		applied[i] = map[uint64]entryKey{}
		r.mu.Lock()
		floors := r.restartFloors[i]
		r.mu.Unlock()
		started := 0
		for _, rec := range recs {
			if rec.Kind == history.KindStarted {
				if started > 0 && lieRun {
					// After a lie, what the member applied in its earlier
					// runs is protected by the floor it restarted with,
					// no further: entries it committed above it may be
					// ones the cluster lost (docs/chaos.md, "A lying disk").
					f, ok := floors[started]
					for ix := range applied[i] {
						if !ok || ix > f {
							delete(applied[i], ix)
						}
					}
				}
				started++
			}
			if rec.Kind != history.KindApplied {
				continue
			}
			k := entryKey{rec.Term, rec.CRC}
			if was, ok := applied[i][rec.Index]; ok && was != k {
				return Verdict{Checker: "honest", At: r.since(), Index: rec.Index, Members: []int{i},
					Detail: fmt.Sprintf("m%d, which never lied, applied two entries at index %d: %s, then %s (its run %d)", i, rec.Index, was, k, started)}
			}
			applied[i][rec.Index] = k
		}
	}
	r.mu.Lock()
	lead := r.finalLead
	r.mu.Unlock()
	if lead < 0 {
		return Verdict{Checker: "honest", OK: true, Detail: "one history per member that never lied; the final log not compared: no final leader"}
	}
	log, compacted, err := r.finalLog(lead)
	if err != nil {
		return Verdict{Checker: "honest", At: r.since(), Members: []int{lead}, Detail: fmt.Sprintf("the final leader m%d's log: %v", lead, err)}
	}
	compared, diverged := 0, 0
	var seen []string
	for _, i := range r.live() {
		if applied[i] == nil {
			continue
		}
		first, mine, theirs := uint64(0), entryKey{}, entryKey{}
		for ix, k := range applied[i] {
			f, ok := log[ix]
			if !ok && i != lead { // the leader is judged by its own log alone
				f, ok = compacted[ix]
			}
			if !ok {
				continue
			}
			compared++
			if f != k && (first == 0 || ix < first) {
				first, mine, theirs = ix, k, f
			}
		}
		if first == 0 {
			continue
		}
		r.mu.Lock()
		d := r.diverged[i]
		r.mu.Unlock()
		if d == nil || d.Leader == "" {
			return Verdict{Checker: "honest", At: r.since(), Index: first, Members: []int{i, lead},
				Detail: fmt.Sprintf("m%d applied index %d %s, the cluster's final log (m%d) holds %s there, and m%d does not report Diverged: it lost an entry it had applied", i, first, mine, lead, theirs, i)}
		}
		own, err := r.logEntry(i, first)
		if err != nil {
			return Verdict{Checker: "honest", At: r.since(), Index: first, Members: []int{i}, Detail: fmt.Sprintf("m%d's log: %v", i, err)}
		}
		if own == theirs {
			return Verdict{Checker: "honest", At: r.since(), Index: first, Members: []int{i, lead},
				Detail: fmt.Sprintf("m%d applied index %d %s and reports Diverged (leader %s), but its log took the cluster's entry (%s) there", i, first, mine, d.Leader, theirs)}
		}
		diverged++
		seen = append(seen, fmt.Sprintf("m%d applied index %d %s, the final log holds %s; Diverged at %d, leader %s term %d", i, first, mine, theirs, d.Index, d.Leader, d.LeaderTerm))
	}
	detail := fmt.Sprintf("one history per member that never lied; %d applied entries compared with the final log (m%d); members where it differs: %d, each reporting Diverged and keeping its own entry", compared, lead, diverged)
	if len(seen) > 0 {
		detail += " (" + strings.Join(seen, "; ") + ")"
	}
	return Verdict{Checker: "honest", OK: true, Detail: detail}
}

// noteRestartFloor records, before member i's process starts again, the
// commit floor its log holds on disk, as the floor of its next Started
// record.
func (r *runner) noteRestartFloor(i int) {
	recs, err := r.historyOf(i)
	if err != nil {
		return
	}
	started := 0
	for _, rec := range recs {
		if rec.Kind == history.KindStarted {
			started++
		}
	}
	sh, err := r.p.LogShapeOf(i)
	if err != nil {
		return
	}
	r.mu.Lock()
	if r.restartFloors[i] == nil {
		r.restartFloors[i] = map[int]uint64{}
	}
	r.restartFloors[i][started] = sh.Floor
	r.mu.Unlock()
}

// historyOf reads member i's applied history file (none: no records).
func (r *runner) historyOf(i int) ([]history.Record, error) {
	path := filepath.Join(r.p.Cfgs[i].DataDir, history.FileName)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil, nil
	}
	return history.FileSource(r.p.Cfgs[i].ID, path).Since(0)
}

// finalLog returns the entries of member lead's log on disk and, at the
// indexes it no longer holds (compacted), what it applied there when it
// never lied.
func (r *runner) finalLog(lead int) (log, compacted map[uint64]entryKey, err error) {
	log, compacted = map[uint64]entryKey{}, map[uint64]entryKey{}
	err = r.scanLog(lead, 0, func(ix uint64, v *walcompare.View) bool {
		if v.Present && !v.Corrupt {
			log[ix] = entryKey{v.Term, v.CRC}
		}
		return true
	})
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	lied := r.lied[lead]
	r.mu.Unlock()
	if lied {
		return log, compacted, nil
	}
	recs, err := r.historyOf(lead)
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range recs {
		if _, held := log[rec.Index]; !held && rec.Kind == history.KindApplied {
			compacted[rec.Index] = entryKey{rec.Term, rec.CRC}
		}
	}
	return log, compacted, nil
}

// logEntry returns member i's log entry at index ix (zero when absent).
func (r *runner) logEntry(i int, ix uint64) (entryKey, error) {
	var k entryKey
	err := r.scanLog(i, ix, func(got uint64, v *walcompare.View) bool {
		if got == ix && v.Present && !v.Corrupt {
			k = entryKey{v.Term, v.CRC}
		}
		return false
	})
	return k, err
}

// scanLog scans member i's log on disk from index from.
func (r *runner) scanLog(i int, from uint64, fn func(uint64, *walcompare.View) bool) error {
	m, err := walcompare.OpenDir(fmt.Sprintf("m%d", i), r.p.Cfgs[i].DataDir)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return m.Scan(ctx, from, 0, fn)
}
