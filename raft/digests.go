package raft

import (
	"context"

	"github.com/jobraft/jobraft/internal/logdigest"
)

// methodRangeDigest serves the digest protocol walcompare's online
// comparison reads: range digests and per-entry views of this member's log
// (see package logdigest). It only reads the log.
const methodRangeDigest = logdigest.Method

func (n *Node) handleRangeDigest(ctx context.Context, req []byte) ([]byte, error) {
	return logdigest.Serve(ctx, n.log, n.log.PersistedFloor, req)
}
