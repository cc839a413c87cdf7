package ctltest

import (
	"encoding/json"
	"net/http"
	"sync"
	"syscall"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/nodeopt"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/transport/faultnet"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/faultfs"
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
	mu      sync.Mutex
	net     *faultnet.Network
	disk    *faultfs.FS
	stallID int // the last stall armed
}

// newMemberFaults makes a fault network and a fault FS, both healthy until
// a spec arrives; options are the node options that route the member's
// traffic and log through them.
func newMemberFaults() *memberFaults {
	return &memberFaults{net: faultnet.New(time.Now().UnixNano()), disk: faultfs.New(wal.OSFS{})}
}

// options carries the member's raft traffic, RPCs and log through f.
func (f *memberFaults) options() []nodeopt.Option {
	return append(nodetest.FaultOptions(f.net), nodeopt.WALOptions(wal.WithFS(f.disk)))
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
	return mux
}
