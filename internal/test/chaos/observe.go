package chaos

import (
	"fmt"
	"sync"
	"time"

	"github.com/jobraft/jobraft/internal/test/clustertest"
)

// Sample is one status observation of one member.
type Sample struct {
	At          time.Duration // since the run's start
	Member      int
	OK          bool // the member answered
	Role        string
	Term        uint64
	Commit      uint64
	Applied     uint64
	Last        uint64
	DigestIndex uint64
	Digest      string
}

// observer polls every member's status, keeps the samples, and checks
// election safety and digests on every sample (continuous checkers).
type observer struct {
	r *runner

	mu      sync.Mutex
	samples []Sample
	leaders map[uint64]int                // term → the member seen leading it
	digests map[uint64]string             // digest index → sum
	digAt   map[uint64]int                // digest index → the member that reported it first
	digBy   map[uint64]map[int]digestSeen // digest index → member → its first report (a lie run judges digests again without the members the lie touched)
}

func newObserver(r *runner) *observer {
	return &observer{r: r, leaders: map[uint64]int{}, digests: map[uint64]string{}, digAt: map[uint64]int{}, digBy: map[uint64]map[int]digestSeen{}}
}

// digestSeen is a member's first report of its digest at one index.
type digestSeen struct {
	sum string
	at  time.Duration
}

// pollEvery is the status poll period.
const pollEvery = 50 * time.Millisecond

// run polls until stop is closed.
func (o *observer) run(stop <-chan struct{}) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		o.round()
	}
}

// round polls every running member once, concurrently.
func (o *observer) round() {
	n := o.r.s.Slots()
	var wg sync.WaitGroup
	out := make([]Sample, n)
	at := o.r.since() // every sample of a round carries the round's start
	for i := 0; i < n; i++ {
		if !o.r.running(i) {
			out[i] = Sample{At: at, Member: i}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := o.r.p.CallT(i, "/status", clustertest.Request{}, 300*time.Millisecond)
			s := Sample{At: at, Member: i}
			if err == nil {
				s.OK, s.Role, s.Term, s.Commit, s.Applied, s.Last = true, rep.Role, rep.Term, rep.Commit, rep.Applied, rep.Last
				s.DigestIndex, s.Digest = rep.DigestIndex, rep.Digest
			}
			out[i] = s
		}()
	}
	wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range out {
		o.samples = append(o.samples, s)
		if !s.OK {
			continue
		}
		if s.Role == "Leader" {
			if l, ok := o.leaders[s.Term]; ok && l != s.Member {
				o.r.violate(Verdict{Checker: "election", At: s.At, Index: s.Commit,
					Detail: fmt.Sprintf("m%d and m%d both leaders in term %d", l, s.Member, s.Term)})
			} else if !ok {
				o.leaders[s.Term] = s.Member
			}
		}
		if s.DigestIndex > 0 {
			if o.digBy[s.DigestIndex] == nil {
				o.digBy[s.DigestIndex] = map[int]digestSeen{}
			}
			if own, ok := o.digBy[s.DigestIndex][s.Member]; !ok {
				o.digBy[s.DigestIndex][s.Member] = digestSeen{s.Digest, s.At}
			} else if own.sum != s.Digest {
				o.r.violate(Verdict{Checker: "digest", At: s.At, Index: s.DigestIndex, Members: []int{s.Member},
					Detail: fmt.Sprintf("m%d digest %.8s, then %.8s at applied index %d", s.Member, own.sum, s.Digest, s.DigestIndex)})
			}
			if d, ok := o.digests[s.DigestIndex]; ok && d != s.Digest {
				o.r.violate(Verdict{Checker: "digest", At: s.At, Index: s.DigestIndex, Members: []int{o.digAt[s.DigestIndex], s.Member},
					Detail: fmt.Sprintf("m%d digest %.8s, m%d digest %.8s at applied index %d", o.digAt[s.DigestIndex], d, s.Member, s.Digest, s.DigestIndex)})
			} else if !ok {
				o.digests[s.DigestIndex], o.digAt[s.DigestIndex] = s.Digest, s.Member
			}
		}
	}
}

// all returns a copy of the samples.
func (o *observer) all() []Sample {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Sample(nil), o.samples...)
}

// leader returns the member leading in the highest term of the latest
// round, or -1.
func (o *observer) leader() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.r.s.Slots()
	if len(o.samples) < n {
		return -1
	}
	best, term := -1, uint64(0)
	for _, s := range o.samples[len(o.samples)-n:] {
		if s.OK && s.Role == "Leader" && s.Term >= term {
			best, term = s.Member, s.Term
		}
	}
	return best
}

// lastSample returns member m's sample of the latest round it answered
// that started at or after since (OK false: none).
func (o *observer) lastSample(m int, since time.Duration) Sample {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := len(o.samples) - 1; k >= 0 && o.samples[k].At >= since; k-- {
		if s := o.samples[k]; s.Member == m && s.OK {
			return s
		}
	}
	return Sample{Member: m}
}
