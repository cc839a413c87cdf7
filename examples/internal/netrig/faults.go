//go:build linux

package netrig

import (
	"errors"
	"fmt"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// The two directions of a link's connections, as Toxiproxy names them:
// upstream carries what the dialing member sends, downstream the replies.
const (
	up   = "upstream"
	down = "downstream"
)

// Links lists every link (n members: n(n-1)).
func (r *Rig) Links() []Link {
	var ls []Link
	for i := range r.n {
		for j := range r.n {
			if i != j {
				ls = append(ls, Link{i, j})
			}
		}
	}
	return ls
}

// Latency delays every byte on every link by half of rtt in each
// direction, ± half of jitter (uniform), so a round trip between two
// members takes rtt ± jitter on top of the proxies' own cost. 0 removes it.
func (r *Rig) Latency(rtt, jitter time.Duration) error {
	var errs []error
	for _, l := range r.Links() {
		for _, s := range []string{up, down} {
			errs = append(errs, r.toxic(l, "delay-"+s, "delay", s, rtt > 0, toxiclient.Attributes{
				"delay_us": (rtt / 2).Microseconds(), "jitter_us": (jitter / 2).Microseconds()}))
		}
	}
	return errors.Join(errs...)
}

// Bandwidth caps every link, each direction of each connection, at
// kbPerSec kilobytes per second; 0 removes the cap.
func (r *Rig) Bandwidth(kbPerSec int64) error {
	var errs []error
	for _, l := range r.Links() {
		for _, s := range []string{up, down} {
			errs = append(errs, r.toxic(l, "bandwidth-"+s, "bandwidth", s, kbPerSec > 0, toxiclient.Attributes{"rate": kbPerSec}))
		}
	}
	return errors.Join(errs...)
}

// Resets resets (TCP RST) every connection on l after after from its first
// byte, new ones too, until Heal.
func (r *Rig) Resets(l Link, after time.Duration) error {
	return r.toxic(l, "reset", "reset_peer", up, true, toxiclient.Attributes{"timeout": after.Milliseconds()})
}

// Cut drops every byte member from sends to member to, until Heal: on
// from's connections to to their requests, on to's connections to from
// its replies. The other direction still flows (a one-way partition).
// Connections stay open, as through a black hole; Heal closes the ones
// that lost bytes.
func (r *Rig) Cut(from, to int) error {
	return errors.Join(
		r.toxic(Link{from, to}, "cut-"+up, "timeout", up, true, toxiclient.Attributes{"timeout": 0}),
		r.toxic(Link{to, from}, "cut-"+down, "timeout", down, true, toxiclient.Attributes{"timeout": 0}))
}

// Isolate cuts member m off from every other member, both ways (a full
// partition); this process still reaches its API.
func (r *Rig) Isolate(m int) error {
	var errs []error
	for k := range r.n {
		if k != m {
			errs = append(errs, r.Cut(m, k), r.Cut(k, m))
		}
	}
	return errors.Join(errs...)
}

// Heal removes every cut and reset; latency and bandwidth stay.
func (r *Rig) Heal() error {
	var errs []error
	for _, l := range r.Links() {
		for _, name := range []string{"cut-" + up, "cut-" + down, "reset"} {
			errs = append(errs, r.toxic(l, name, "", "", false, nil))
		}
	}
	return errors.Join(errs...)
}

// toxic adds (on) or removes the toxic name on link l; adding one present
// updates its attributes, removing one absent does nothing.
func (r *Rig) toxic(l Link, name, typ, stream string, on bool, attrs toxiclient.Attributes) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	p, ok := r.proxies[l]
	if !ok {
		return fmt.Errorf("netrig: no link %s", l.name())
	}
	have := r.toxics[l]
	if have == nil {
		have = map[string]bool{}
		r.toxics[l] = have
	}
	var err error
	switch {
	case on && have[name]:
		_, err = p.UpdateToxic(name, 1, attrs)
	case on:
		_, err = p.AddToxic(name, typ, stream, 1, attrs)
		have[name] = err == nil
	case have[name]:
		err = p.RemoveToxic(name)
		have[name] = err != nil
	}
	if err != nil {
		return fmt.Errorf("netrig: link %s, toxic %s: %w", l.name(), name, err)
	}
	return nil
}
