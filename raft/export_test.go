package raft

import "time"

// SetThrottleWait replaces how n's stream throttle waits (time.Sleep):
// the catch-up tests make it spin, a catch-up that costs the leader CPU.
// Call it before the node streams to a member catching up.
func SetThrottleWait(n *Node, wait func(time.Duration)) { n.meter.sleep = wait }
