//go:build linux

package main

import (
	"math/rand/v2"
	"time"

	"github.com/Shopify/toxiproxy/v2/toxics"
	"golang.org/x/sys/unix"
)

// delayToxic holds every chunk until delay_us ± jitter_us (uniform) after
// the proxy read it, in order: Toxiproxy's own "latency" toxic counts in
// whole milliseconds, too coarse for a 0.2 ms round trip or a 10% jitter
// on 2 ms. A chunk drawn a shorter delay than the one before it leaves
// right after that one (a TCP stream is never reordered).
type delayToxic struct {
	DelayUS  int64 `json:"delay_us"`
	JitterUS int64 `json:"jitter_us"`
}

// GetBufferSize lets a link hold a bandwidth-delay product's worth of
// chunks while they wait (toxics.BufferedToxic).
func (t *delayToxic) GetBufferSize() int { return 1024 }

func (t *delayToxic) draw() time.Duration {
	d := t.DelayUS
	if t.JitterUS > 0 {
		d += rand.Int64N(2*t.JitterUS+1) - t.JitterUS
	}
	return time.Duration(d) * time.Microsecond
}

// Pipe implements toxics.Toxic.
func (t *delayToxic) Pipe(stub *toxics.ToxicStub) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			switch wait := time.Until(c.Timestamp.Add(t.draw())); {
			case wait <= 0:
			case wait < fine:
				sleep(wait)
			default:
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-stub.Interrupt:
					timer.Stop()
					stub.Output <- c // removed while waiting: pass it on, lose nothing
					return
				}
			}
			stub.Output <- c
		}
	}
}

// fine is the longest wait sleep takes: the runtime's timers wake no
// sooner than the next millisecond on this kernel (a 0.1 ms timer fires
// after 1.1 ms), ten times a 0.2 ms round trip's delay. A wait this short
// is not interrupted; the toxic sees its interrupt right after.
const fine = 5 * time.Millisecond

// sleep blocks this goroutine's thread for d with nanosleep, its timer
// slack set to 1 ns (the default 50 µs is a quarter of a 0.2 ms round
// trip): about 25 µs late on this machine.
func sleep(d time.Duration) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

var (
	_ toxics.Toxic         = (*delayToxic)(nil)
	_ toxics.BufferedToxic = (*delayToxic)(nil)
)

func init() { toxics.Register("delay", new(delayToxic)) }
