package segment

import (
	"time"

	"github.com/hashicorp/raft"
)

// entryCache keeps the most recently stored entries in a ring indexed by
// index mod size. Guarded by Log.mu.
//
// It keeps a copy of each stored *raft.Log, sharing its Data and
// Extensions with the caller's: a Raft implementation never changes an
// entry it stored (hashicorp/raft's own LogCache keeps its callers'
// pointers; StoreLogs asks its callers the same), and encoding each batch
// into a new buffer the cache could keep, then copying a deferred batch
// into the waiting frame, were a fifth of what a submit allocated across
// the three members of a cluster. A cached entry reads as the same
// entry read from its segment: AppendedAt at the nanosecond, without a
// monotonic reading, empty Data and Extensions not nil.
type entryCache struct {
	ring []*raft.Log
}

func newEntryCache(n int) *entryCache { return &entryCache{ring: make([]*raft.Log, n)} }

// put caches l, just stored.
func (c *entryCache) put(l *raft.Log) {
	if len(c.ring) == 0 {
		return
	}
	e := new(raft.Log)
	*e = *l
	if !e.AppendedAt.IsZero() {
		e.AppendedAt = time.Unix(0, e.AppendedAt.UnixNano())
	}
	if e.Data == nil {
		e.Data = []byte{}
	}
	if e.Extensions == nil {
		e.Extensions = []byte{}
	}
	c.ring[e.Index%uint64(len(c.ring))] = e
}

func (c *entryCache) get(i uint64) *raft.Log {
	if len(c.ring) == 0 {
		return nil
	}
	if e := c.ring[i%uint64(len(c.ring))]; e != nil && e.Index == i {
		return e
	}
	return nil
}

// dropFrom forgets every entry at or above i.
func (c *entryCache) dropFrom(i uint64) {
	for k, e := range c.ring {
		if e != nil && e.Index >= i {
			c.ring[k] = nil
		}
	}
}

// dropThrough forgets every entry at or below i.
func (c *entryCache) dropThrough(i uint64) {
	for k, e := range c.ring {
		if e != nil && e.Index <= i {
			c.ring[k] = nil
		}
	}
}
