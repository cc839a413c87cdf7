package coalesce

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// errClosed is the rig's Policy.ErrClosed.
var errClosed = errors.New("coalesce test: closed")

// holdRig is a coalescer of ints whose entries the test answers: an entry
// sent waits until the test releases it (answer), then answers each of
// its requests with its own value. Time is synctest's.
type holdRig struct {
	t    *testing.T
	c    *Coalescer[int, int]
	sent chan []int // each entry's requests, as it is sent
	mu   sync.Mutex
	free map[int]chan struct{} // an entry's release, by its first request
	wait map[int]*Pending[int, int]
}

func newHoldRig(t *testing.T, inflight int, hold time.Duration) *holdRig {
	return newHoldRigOn(t, inflight, NewGate(hold))
}

// newHoldRigOn is a rig whose coalescer joins g (which other rigs may share).
func newHoldRigOn(t *testing.T, inflight int, g *Gate) *holdRig {
	r := &holdRig{t: t, sent: make(chan []int, 64), free: map[int]chan struct{}{}, wait: map[int]*Pending[int, int]{}}
	r.c = New(g, Policy[int, int]{
		Inflight:  inflight,
		Take:      func(q []*Pending[int, int]) int { return len(q) },
		Closed:    -1,
		ErrClosed: errClosed,
		Send: func(batch []*Pending[int, int]) {
			free := make(chan struct{})
			r.mu.Lock()
			r.free[batch[0].Req] = free
			r.mu.Unlock()
			var reqs []int
			for _, p := range batch {
				reqs = append(reqs, p.Req)
			}
			r.sent <- reqs
			<-free
			for _, p := range batch {
				p.Answer(p.Req)
			}
		},
	})
	return r
}

// holdAfterPair sends 1 alone, then 2 and 3 as one entry behind it, and
// answers both: a hold for two callers has begun.
func (r *holdRig) holdAfterPair() {
	r.submit(1)
	r.submit(2)
	r.submit(3)
	r.sentNow()
	r.answer(1, 1)
	r.sentNow()
	r.answer(2, 2, 3)
}

// submit queues request v.
func (r *holdRig) submit(v int) {
	p, err := r.c.Enqueue(v)
	if err != nil {
		r.t.Fatalf("enqueue %d: %v", v, err)
	}
	r.wait[v] = p
}

// sentNow returns the entries sent since the last call, once every
// goroutine of the bubble is blocked.
func (r *holdRig) sentNow() [][]int {
	synctest.Wait()
	var out [][]int
	for {
		select {
		case s := <-r.sent:
			out = append(out, s)
		default:
			return out
		}
	}
}

// answer releases the entry whose first request is first and waits for
// every one of its requests' answers.
func (r *holdRig) answer(first int, reqs ...int) {
	r.mu.Lock()
	ch := r.free[first]
	r.mu.Unlock()
	close(ch)
	for _, v := range reqs {
		if got := <-r.wait[v].Done(); got != v {
			r.t.Fatalf("request %d answered %d", v, got)
		}
	}
}

func wantSent(t *testing.T, what string, got [][]int, want ...[]int) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b []int) bool { return slices.Equal(a, b) }) {
		t.Fatalf("%s: entries sent %v, want %v", what, got, want)
	}
}

// TestHoldGathersTheAnsweredCallers: once an entry of two or more requests
// is answered, the next entry waits until as many requests are queued as
// were answered (then goes at once, the clock unmoved), or until the hold
// ends (then goes with what is queued, exactly at the hold).
func TestHoldGathersTheAnsweredCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = 300 * time.Microsecond
		r := newHoldRig(t, 1, hold)
		r.submit(1)
		r.submit(2)
		r.submit(3)
		wantSent(t, "three requests, one slot", r.sentNow(), []int{1})
		r.answer(1, 1) // an entry of one request: no hold
		wantSent(t, "after a lone request's entry", r.sentNow(), []int{2, 3})

		start := time.Now()
		r.answer(2, 2, 3) // two answered: hold for two
		r.submit(4)
		wantSent(t, "one of the two callers back", r.sentNow())
		r.submit(5)
		wantSent(t, "both callers back", r.sentNow(), []int{4, 5})
		if d := time.Since(start); d != 0 {
			t.Fatalf("a hold that filled took %v, want no time at all", d)
		}
		if h, e := r.c.gate.Holds(), r.c.gate.Expired(); h != 1 || e != 0 {
			t.Fatalf("holds %d expired %d, want 1 and 0", h, e)
		}

		start = time.Now()
		r.answer(4, 4, 5)
		r.submit(6) // only one of the two comes back
		wantSent(t, "one caller back, hold running", r.sentNow())
		time.Sleep(hold - time.Nanosecond)
		wantSent(t, "a nanosecond before the hold ends", r.sentNow())
		time.Sleep(time.Nanosecond)
		wantSent(t, "the hold ended", r.sentNow(), []int{6})
		if d := time.Since(start); d != hold {
			t.Fatalf("an expired hold sent after %v, want %v", d, hold)
		}
		if h, e := r.c.gate.Holds(), r.c.gate.Expired(); h != 2 || e != 1 {
			t.Fatalf("holds %d expired %d, want 2 and 1", h, e)
		}
		r.answer(6, 6)
		r.c.Close()
	})
}

// TestHoldNeverDelaysALoneCaller: a caller whose entry held only its own
// request goes again at once, entry after entry; so does every caller with
// the hold off.
func TestHoldNeverDelaysALoneCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHoldRig(t, 4, time.Second)
		start := time.Now()
		for i := 1; i <= 5; i++ {
			r.submit(i)
			wantSent(t, "a lone caller", r.sentNow(), []int{i})
			r.answer(i, i)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("a lone caller waited %v", d)
		}
		if h := r.c.gate.Holds(); h != 0 {
			t.Fatalf("%d holds for a lone caller", h)
		}
		r.c.Close()
	})
	synctest.Test(t, func(t *testing.T) {
		r := newHoldRig(t, 1, 0)
		r.submit(1)
		r.submit(2)
		r.submit(3)
		wantSent(t, "hold off", r.sentNow(), []int{1})
		r.answer(1, 1)
		wantSent(t, "hold off", r.sentNow(), []int{2, 3})
		r.answer(2, 2, 3)
		r.submit(4)
		wantSent(t, "hold off: the first caller back goes at once", r.sentNow(), []int{4})
		if h := r.c.gate.Holds(); h != 0 {
			t.Fatalf("%d holds with the hold off", h)
		}
		r.answer(4, 4)
		r.c.Close()
	})
}

// TestCloseDuringAHold: close during a hold answers what is queued as
// closed, and the hold's timer, when it fires later, sends nothing.
func TestCloseDuringAHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHoldRig(t, 1, time.Millisecond)
		r.holdAfterPair()
		r.submit(4) // held: one of two
		wantSent(t, "held", r.sentNow())
		r.c.Close()
		if got := <-r.wait[4].Done(); got != -1 {
			t.Fatalf("request queued at close answered %d, want the closed outcome", got)
		}
		time.Sleep(time.Second)
		wantSent(t, "after close and the hold's time", r.sentNow())
		if _, err := r.c.Enqueue(5); err != errClosed {
			t.Fatalf("enqueue after close: %v, want errClosed", err)
		}
	})
}

// TestHoldWithdraw: a request withdrawn while held is never sent, and the
// hold still ends when enough others are queued.
func TestHoldWithdraw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHoldRig(t, 1, time.Second)
		r.holdAfterPair()
		r.submit(4)
		if !r.c.Withdraw(r.wait[4]) {
			t.Fatal("a held request could not be withdrawn")
		}
		r.submit(5)
		wantSent(t, "one back after a withdrawal", r.sentNow())
		r.submit(6)
		wantSent(t, "two back", r.sentNow(), []int{5, 6})
		r.answer(5, 5, 6)
		r.c.Close()
	})
}

// TestHoldStopsForCallersWhoDoNotComeBack: after holdMisses holds in a row
// ended by the timer, answered entries start no hold but one in holdProbe;
// a probe that fills makes every entry hold again.
func TestHoldStopsForCallersWhoDoNotComeBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = time.Millisecond
		r := newHoldRig(t, 1, hold)
		next := 1
		// pair sends an entry of one request, then one of two queued behind
		// it, and answers both; the callers do not come back.
		pair := func() {
			x, a, b := next, next+1, next+2
			next += 3
			r.submit(x)
			for sent := r.sentNow(); len(sent) == 0; sent = r.sentNow() {
				time.Sleep(hold) // a hold from the previous pair still runs
			}
			r.submit(a)
			r.submit(b)
			r.answer(x, x) // one request: no hold
			wantSent(t, "behind a lone request", r.sentNow(), []int{a, b})
			r.answer(a, a, b)
			synctest.Wait()
		}
		for i := 0; i < holdMisses; i++ {
			pair()
			time.Sleep(hold)
			synctest.Wait()
		}
		if h, e := r.c.gate.Holds(), r.c.gate.Expired(); h != holdMisses || e != holdMisses {
			t.Fatalf("holds %d expired %d, want %d and %d", h, e, holdMisses, holdMisses)
		}
		for i := 0; i < holdProbe-1; i++ {
			pair()
		}
		if h := r.c.gate.Holds(); h != holdMisses {
			t.Fatalf("%d holds after %d misses in a row and %d entries, want none more", h, holdMisses, holdProbe-1)
		}
		pair() // the probe: it holds
		if h := r.c.gate.Holds(); h != holdMisses+1 {
			t.Fatalf("holds %d, want the probe's (%d)", h, holdMisses+1)
		}
		r.submit(next)
		r.submit(next + 1) // both come back: the probe fills
		wantSent(t, "the probe filled", r.sentNow(), []int{next, next + 1})
		r.answer(next, next, next+1) // an entry of two: it holds again
		next += 2
		synctest.Wait()
		if h := r.c.gate.Holds(); h != holdMisses+2 {
			t.Fatalf("holds %d after a filled probe, want every entry to hold again (%d)", h, holdMisses+2)
		}
		time.Sleep(hold)
		r.c.Close()
	})
}

// TestHoldIsSharedByTheBatchers: callers answered by one coalescer who
// come back to the other (a submit's caller claims next) fill the hold,
// every caller answered while it runs is waited for too, and the held
// requests of both go out together.
func TestHoldIsSharedByTheBatchers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Second)
		sub, ops := newHoldRigOn(t, 1, g), newHoldRigOn(t, 1, g)
		ops.submit(100) // a lease command waiting for its slot behind 101
		ops.submit(101)
		wantSent(t, "ops", ops.sentNow(), []int{100})
		sub.holdAfterPair()  // two submitters answered: a hold for 101 and two more
		ops.answer(100, 100) // answered during the hold: its caller is waited for too
		wantSent(t, "ops: held with the submits", ops.sentNow())
		start := time.Now()
		ops.submit(102) // a submitter back, with a lease command: two of four
		sub.submit(4)   // the other, with a submit: three of four
		wantSent(t, "submits: three of four", sub.sentNow())
		wantSent(t, "ops: three of four", ops.sentNow())
		ops.submit(103) // 100's caller: four
		wantSent(t, "submits released", sub.sentNow(), []int{4})
		wantSent(t, "ops released with them", ops.sentNow(), []int{101, 102, 103})
		if d := time.Since(start); d != 0 {
			t.Fatalf("a shared hold that filled took %v", d)
		}
		if h, e := g.Holds(), g.Expired(); h != 1 || e != 0 {
			t.Fatalf("holds %d expired %d, want 1 and 0", h, e)
		}
		sub.answer(4, 4)
		ops.answer(101, 101, 102, 103)
		time.Sleep(time.Second)
		sub.c.Close()
		ops.c.Close()
	})
}
