// Package wal is jobraft's log: a segment-file raft.LogStore with a bbolt
// stable store, and the persist guard (G1–G7 of DESIGN.md), built in and
// available as middleware over any raft.LogStore.
package wal
