//go:build linux

package main

import (
	"math/rand/v2"
	"time"

	"github.com/Shopify/toxiproxy/v2/toxics"
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
			if wait := time.Until(c.Timestamp.Add(t.draw())); wait > 0 {
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

var (
	_ toxics.Toxic         = (*delayToxic)(nil)
	_ toxics.BufferedToxic = (*delayToxic)(nil)
)

func init() { toxics.Register("delay", new(delayToxic)) }
