package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/test/nodeopt"
	"github.com/jobraft/jobraft/snapshot"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
	"github.com/jobraft/jobraft/wal/segment"
)

// FaultSpec is the whole fault state of one member process, replaced at
// once by POST /faults (MemberConfig.Faults). Network rules name raft
// addresses; a member applies them to the calls it makes (a request on
// from→to, its reply on to→from), so the same spec pushed to every member
// gives every link the same rules.
type FaultSpec struct {
	// Cut links, one way each: [from, to].
	Cut [][2]string `json:"cut,omitempty"`
	// Flap links (both ways) up and down every Period.
	Flap []FlapSpec `json:"flap,omitempty"`
	// Drop and Dup are per-message probabilities; Delay is added to each.
	Drop  float64       `json:"drop,omitempty"`
	Dup   float64       `json:"dup,omitempty"`
	Delay time.Duration `json:"delay,omitempty"`
	// FailSyncs makes this member's log fsyncs fail (EIO); DiskFull
	// makes its log writes fail with ENOSPC.
	FailSyncs bool `json:"fail_syncs,omitempty"`
	DiskFull  bool `json:"disk_full,omitempty"`
	// Stall makes this member's next log fsync take that much longer,
	// once per StallID (a disk that stalls): a spec pushed again with the
	// same StallID does not stall again.
	Stall   time.Duration `json:"stall,omitempty"`
	StallID int           `json:"stall_id,omitempty"`
}

// FlapSpec is one flapping link.
type FlapSpec struct {
	A      string        `json:"a"`
	B      string        `json:"b"`
	Period time.Duration `json:"period"`
}

// memberFaults is a member process's fault network and faulty disk.
type memberFaults struct {
	mu  sync.Mutex
	net *faultnet.Network
	// disk carries the member's log (its segments and directory), the
	// target of every disk fault (FaultSpec, POST /lie); snaps its
	// snapshot store, faultless but for a power loss, which covers both.
	disk, snaps *faultfs.FS
	dataDir     string
	stallID     int // the last stall armed
}

// newMemberFaults makes a fault network and the fault FSs, healthy until
// a spec arrives; options are the node options that route the member's
// traffic, log and snapshots through them.
func newMemberFaults(dataDir string) *memberFaults {
	return &memberFaults{net: faultnet.New(time.Now().UnixNano()), disk: faultfs.New(wal.OSFS{}), snaps: faultfs.New(wal.OSFS{}), dataDir: dataDir}
}

// logDir is where a member's node keeps its log (raft.Config.DataDir/log):
// its segment files, and its stable store (term, vote).
func logDir(dataDir string) string { return filepath.Join(dataDir, "log") }

// lieDir is where a member's lying disk keeps the log as it was when the
// lie began (POST /lie), next to the data dir: nothing the member opens.
func lieDir(dataDir string) string { return filepath.Clean(dataDir) + ".lie" }

// isSegment names the files a lie covers: the log's segments. The stable
// store (stable.db: current term and vote) is not written through the
// fault FS and keeps its durability: a vote forgotten would let a member
// vote twice in a term, an election-safety failure of the fault's own.
func isSegment(name string) bool { return strings.HasSuffix(name, ".seg") }

// options carries the member's raft traffic, RPCs, log and snapshots
// through f. The snapshot store has a file system of its own, so that the
// disk faults (EIO, ENOSPC, a stall: "the log's fsyncs") stay the log's.
func (f *memberFaults) options() []nodeopt.Option {
	return append(FaultOptions(f.net), nodeopt.WALOptions(wal.WithFS(f.disk)),
		nodeopt.SnapshotOptions(snapshot.WithFS(f.snaps)))
}

// apply replaces the member's fault state with s.
func (f *memberFaults) apply(s FaultSpec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.net.Heal()
	for _, c := range s.Cut {
		f.net.Cut(hraft.ServerAddress(c[0]), hraft.ServerAddress(c[1]))
	}
	for _, fl := range s.Flap {
		f.net.Flap(hraft.ServerAddress(fl.A), hraft.ServerAddress(fl.B), fl.Period)
	}
	f.net.SetDrop(s.Drop)
	f.net.SetDuplicate(s.Dup)
	f.net.SetDelay(s.Delay, s.Delay/2)
	var syncErr, writeErr error
	if s.FailSyncs {
		syncErr = syscall.EIO
	}
	if s.DiskFull {
		writeErr = syscall.ENOSPC
	}
	f.disk.FailSyncs(syncErr)
	f.disk.FailWrites(writeErr)
	if s.Stall > 0 && s.StallID != f.stallID {
		f.stallID = s.StallID
		f.disk.StallNextSync(s.Stall)
	}
}

// handler serves POST /faults (a FaultSpec) and passes the rest to next.
func (f *memberFaults) handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var s FaultSpec
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.apply(s)
		_ = json.NewEncoder(w).Encode(Reply{Outcome: OutcomeOK})
	})
	// POST /lie: from now on the member's log lies (its fsyncs succeed, its
	// data stays in a volatile cache): the log's segments are copied, with
	// no write, sync, truncation or removal interleaving (faultfs.Checkpoint),
	// and the harness's Procs.LoseLog puts the copy back after a kill.
	mux.HandleFunc("POST /lie", func(w http.ResponseWriter, r *http.Request) {
		rep := Reply{Outcome: OutcomeOK}
		if err := f.disk.Checkpoint(logDir(f.dataDir), lieDir(f.dataDir), isSegment); err != nil {
			rep = Reply{Outcome: OutcomeError, Error: err.Error()}
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
	// POST /powerloss: the power goes (faultfs.FS.PowerLoss, the log's then
	// the snapshot store's: every file and directory they wrote goes back
	// to what it last fsynced, and every later operation fails), then the
	// process SIGKILLs itself at once: it answers nothing, and sends nothing
	// on the strength of what it lost. A PowerLoss that fails is answered
	// (the process runs on; the caller decides).
	mux.HandleFunc("POST /powerloss", func(w http.ResponseWriter, r *http.Request) {
		// What the loss will undo, measured a moment before it, for the
		// harness to report (a file beside the data dir, not through f).
		u, v := f.disk.Unsynced(), f.snaps.Unsynced()
		if b, err := json.Marshal(faultfs.Pending{Files: u.Files + v.Files, Bytes: u.Bytes + v.Bytes, Entries: u.Entries + v.Entries}); err == nil {
			_ = os.WriteFile(powerLossReport(f.dataDir), b, 0o600)
		}
		if err := errors.Join(f.disk.PowerLoss(), f.snaps.PowerLoss()); err != nil {
			_ = json.NewEncoder(w).Encode(Reply{Outcome: OutcomeError, Error: err.Error()})
			return
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	})
	return mux
}

// powerLossReport is where a member writes, just before its power loss,
// what the loss will undo (faultfs.Pending), beside its data dir.
func powerLossReport(dataDir string) string { return filepath.Clean(dataDir) + ".powerloss" }

// PowerLoss cuts member i's power (POST /powerloss) and reaps the process:
// its log on disk is what it had fsynced. It returns what the loss undid,
// as the member measured it a moment before. An error means the power
// loss did not take effect as modelled: the member refused (its process
// still runs), or it neither answered nor died within a few seconds (it is
// then SIGKILLed: a plain kill).
func (p *CtlProcs) PowerLoss(i int) (faultfs.Pending, error) {
	var undid faultfs.Pending
	pr := p.procs[i]
	if !pr.Running() {
		return undid, fmt.Errorf("clustertest: power loss of %s: not running", p.Cfgs[i].ID)
	}
	report := powerLossReport(p.Cfgs[i].DataDir)
	_ = os.Remove(report)
	rep, err := p.CallT(i, "/powerloss", Request{}, 2*time.Second)
	if err == nil {
		return undid, fmt.Errorf("clustertest: power loss of %s refused: %s %s", p.Cfgs[i].ID, rep.Outcome, rep.Error)
	}
	select { // no answer: the process killed itself
	case <-pr.Exited():
		_ = pr.Kill() // reaps it
	case <-time.After(5 * time.Second):
		_ = pr.Kill()
		return undid, fmt.Errorf("clustertest: power loss of %s: no answer and still running after 5s (%v): killed", p.Cfgs[i].ID, err)
	}
	b, err := os.ReadFile(report)
	if err == nil {
		err = json.Unmarshal(b, &undid)
		_ = os.Remove(report)
	}
	if err != nil {
		return undid, fmt.Errorf("clustertest: power loss of %s: power lost, its report unread: %w", p.Cfgs[i].ID, err)
	}
	return undid, nil
}

// LogShape is what a log on disk holds: its last index and its commit
// floor (the highest floor mark of its segments).
type LogShape struct{ Last, Floor uint64 }

func (s LogShape) String() string { return fmt.Sprintf("last %d floor %d", s.Last, s.Floor) }

// shapeOf reads the log in dir (read-only).
func shapeOf(dir string) (LogShape, error) {
	r, err := segment.ReadOnly(dir)
	if err != nil {
		return LogShape{}, err
	}
	var s LogShape
	err = r.Scan(0, 0, func(rec *segment.Record) bool { s.Last = max(s.Last, rec.Index); return true })
	s.Floor = r.Floor()
	return s, err
}

// LogShapeOf reads member i's log on disk (read-only; the member should
// be stopped).
func (p *CtlProcs) LogShapeOf(i int) (LogShape, error) { return shapeOf(logDir(p.Cfgs[i].DataDir)) }

// LoseLog is the power loss of member i's lying disk: the member must be
// stopped (Kill); its log's segments are replaced by the copy its POST
// /lie took, so everything its log wrote since is lost, floor marks
// included (they live in the segments), while its stable store and
// snapshots stay as they are. The copy is consumed. It returns the log's
// shape before and after.
func (p *CtlProcs) LoseLog(i int) (before, after LogShape, err error) {
	if p.procs[i].Up() {
		return before, after, fmt.Errorf("clustertest: lose log of %s: the member runs", p.Cfgs[i].ID)
	}
	dd := p.Cfgs[i].DataDir
	before, _ = shapeOf(logDir(dd))
	if err := faultfs.Restore(logDir(dd), lieDir(dd), isSegment); err != nil {
		return before, after, err
	}
	after, _ = shapeOf(logDir(dd))
	return before, after, os.RemoveAll(lieDir(dd))
}
