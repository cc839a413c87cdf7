package walcompare

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Options tunes Compare.
type Options struct {
	// Committed, when non-zero, is the committed boundary to use, as given:
	// never raised. It is checked against what a majority holds identically
	// (Report.OverClaimed). Zero: the boundary is the highest commit floor
	// any member persisted.
	Committed uint64
	// From and To are the first and last index to compare, both included:
	// [From, To]. 0 leaves that side unbounded. These are request bounds
	// (like the CLI's --from and --to); the report's ranges are half-open
	// (Report.From, Report.End).
	From, To uint64
	// Stream forces side-by-side reading even when every member is live.
	Stream bool
	// Fanout is the number of sub-ranges per digest request in digest mode
	// (default 16); Leaf the range size at which digest mode fetches the
	// entries themselves (default 64).
	Fanout, Leaf int
}

// ErrNoMembers is returned by Compare without members.
var ErrNoMembers = errors.New("walcompare: no members")

// Compare compares the members' logs index by index and reports every
// divergence (see Classify for the classes and the reference entry, and
// Report for the committed boundary). Members are read side by side in
// index order with memory independent of log length; when every member is
// live (Dial) and Options.Stream is not set, they are compared by range
// digests instead, fetching entries only for the ranges that differ.
// Errors are IO or RPC failures, never content: damage is reported.
func Compare(ctx context.Context, members []Member, opts Options) (*Report, error) {
	if len(members) == 0 {
		return nil, ErrNoMembers
	}
	names := make([]string, len(members))
	seen := map[string]bool{}
	for i, m := range members {
		names[i] = m.Name()
		if seen[names[i]] {
			return nil, fmt.Errorf("walcompare: two members named %q", names[i])
		}
		seen[names[i]] = true
	}
	if !opts.Stream {
		live := make([]*liveMember, 0, len(members))
		for _, m := range members {
			if lm, ok := m.(*liveMember); ok {
				live = append(live, lm)
			}
		}
		if len(live) == len(members) {
			return compareDigests(ctx, live, names, opts)
		}
	}
	return compareStream(ctx, members, names, opts)
}

const batchSize = 1024

type item struct {
	ix uint64
	v  View
}

// cursor reads one member's scan in batches from its goroutine.
type cursor struct {
	ch    chan []item
	free  chan []item
	buf   []item
	pos   int
	done  bool
	seen  bool // an entry was seen: later gaps are holes, not compaction
	errc  chan error
	close func()
}

func startCursor(ctx context.Context, m Member, from, to uint64) *cursor {
	c := &cursor{ch: make(chan []item, 2), free: make(chan []item, 3), errc: make(chan error, 1)}
	for i := 0; i < 3; i++ {
		c.free <- make([]item, 0, batchSize)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	c.close = func() { cancel(); wg.Wait() }
	go func() {
		defer wg.Done()
		defer close(c.ch)
		var b []item
		select {
		case b = <-c.free:
		case <-ctx.Done():
			c.errc <- ctx.Err()
			return
		}
		err := m.Scan(ctx, from, to, func(ix uint64, v *View) bool {
			b = append(b, item{ix, *v})
			if len(b) < batchSize {
				return true
			}
			select {
			case c.ch <- b:
			case <-ctx.Done():
				return false
			}
			select {
			case b = <-c.free:
				b = b[:0]
			case <-ctx.Done():
				return false
			}
			return true
		})
		if err == nil && len(b) > 0 {
			select {
			case c.ch <- b:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		c.errc <- err
	}()
	return c
}

// head returns the next item without consuming it, nil when done.
func (c *cursor) head() *item {
	for !c.done && c.pos >= len(c.buf) {
		if c.buf != nil {
			select {
			case c.free <- c.buf:
			default:
			}
		}
		b, ok := <-c.ch
		if !ok {
			c.done, c.buf = true, nil
			return nil
		}
		c.buf, c.pos = b, 0
	}
	if c.done {
		return nil
	}
	return &c.buf[c.pos]
}

func compareStream(ctx context.Context, members []Member, names []string, opts Options) (*Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	curs := make([]*cursor, len(members))
	for i, m := range members {
		curs[i] = startCursor(ctx, m, opts.From, opts.To)
	}
	defer func() {
		for _, c := range curs {
			c.close()
		}
	}()
	b := newBuilder(names)
	views := make([]View, len(members))
	var lo, hi uint64
	var ix uint64
	started := false
	for {
		// The next index: the lowest head, or the one after the last.
		next, any := uint64(0), false
		for _, c := range curs {
			if h := c.head(); h != nil && (!any || h.ix < next) {
				next, any = h.ix, true
			}
		}
		if !any {
			break
		}
		if !started {
			ix, lo, started = next, next, true
		}
		for i, c := range curs {
			h := c.head()
			switch {
			case h != nil && h.ix == ix:
				views[i] = h.v
				c.pos++
				c.seen = true
			case h == nil && c.seen:
				views[i] = View{Class: Missing}
			case !c.seen:
				// Nothing yet: below this member's first index, or it holds
				// nothing at all from here (an empty log lags).
				if h == nil {
					views[i] = View{Class: Missing}
				} else {
					views[i] = View{Class: Compacted}
				}
			default:
				views[i] = View{Class: Missing} // a hole inside the log
			}
		}
		b.index(ix, Classify(views), views)
		hi = ix
		if ix&8191 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ix++
	}
	var errs []error
	for _, c := range curs {
		c.close()
		if err := <-c.errc; err != nil {
			errs = append(errs, err)
		}
		c.errc <- nil // close() again in the deferred loop is harmless
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Report{Mode: "stream"}
	for _, m := range members {
		r.Members = append(r.Members, m.Info())
	}
	b.finish(r, lo, hi, opts)
	return r, nil
}
