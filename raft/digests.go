package raft

import (
	"context"

	"github.com/jobraft/jobraft/walcompare"
)

// methodRangeDigest serves walcompare's online comparison: range digests
// and per-entry views of this member's log (see walcompare.ServeDigest).
// It only reads the log.
const methodRangeDigest = walcompare.DigestMethod

func (n *Node) handleRangeDigest(ctx context.Context, req []byte) ([]byte, error) {
	return walcompare.ServeDigest(ctx, n.log, n.log.PersistedFloor, req)
}
