package raft

import "time"

// SetStickinessForTest sets how long after its last contact with the
// leader the member refuses other candidates' (pre-)votes (U13; by default
// stickiness of its heartbeat timeout), so a test can tell the seam's rule
// apart from the member's own election timer.
func (n *Node) SetStickinessForTest(d time.Duration) { n.seam.stickyFor.Store(int64(d)) }
