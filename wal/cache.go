package wal

import "github.com/hashicorp/raft"

// entryCache keeps the most recently stored entries, decoded, in a ring
// indexed by index mod size. Guarded by Log.mu.
type entryCache struct {
	ring []*raft.Log
}

func newEntryCache(n int) *entryCache { return &entryCache{ring: make([]*raft.Log, n)} }

// put decodes a record just written (and so verified) into the cache.
func (c *entryCache) put(rec []byte) {
	if len(c.ring) == 0 {
		return
	}
	e := new(raft.Log)
	if _, err := decodeRecord(rec, e); err != nil {
		return
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
