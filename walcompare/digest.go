package walcompare

import (
	"context"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/logdigest"
)

// The digest protocol lives in package logdigest, which every raft member
// links; the names below are kept for walcompare's callers.

// DigestMethod is the RPC method a raft.Node serves range digests of its
// log on. It is logdigest.Method.
const DigestMethod = logdigest.Method

// Digest summarises the entries a member holds in [From, To] (inclusive:
// protocol bounds). It is logdigest.Digest.
type Digest = logdigest.Digest

// SplitRange splits [from, to] (inclusive) into at most parts contiguous
// inclusive sub-ranges. It is logdigest.SplitRange.
func SplitRange(from, to uint64, parts int) [][2]uint64 {
	return logdigest.SplitRange(from, to, parts)
}

// RangeDigests returns the digests of s over the sub-ranges of [from, to]
// given by SplitRange(from, to, parts). It is logdigest.RangeDigests
// without a context.
func RangeDigests(s raft.LogStore, from, to uint64, parts int) ([]Digest, error) {
	return logdigest.RangeDigests(context.Background(), s, from, to, parts)
}

// Errors ServeDigest returns for a request it refuses (nothing is read);
// errors.Is matches them. Over the RPC channel only their text arrives.
var (
	// ErrBadDigestRequest: the request is not JSON, or its range or part
	// count is outside the protocol's limits (From > To, too many parts
	// or entries).
	ErrBadDigestRequest = logdigest.ErrBadRequest
	// ErrUnknownDigestOp: the request names an operation the protocol
	// does not have.
	ErrUnknownDigestOp = logdigest.ErrUnknownOp
)

// ServeDigest answers one DigestMethod request about s, a member's log,
// with floor its persisted commit floor (nil: none). A request it refuses
// is ErrBadDigestRequest or ErrUnknownDigestOp; anything else is the log's
// read error.
func ServeDigest(ctx context.Context, s raft.LogStore, floor func() uint64, req []byte) ([]byte, error) {
	return logdigest.Serve(ctx, s, floor, req)
}

// viewOf returns the comparer's view of an entry as the protocol reads it;
// its Class is unset until Classify.
func viewOf(d *logdigest.View) View {
	return View{Present: d.Present, Term: d.Term, Type: d.Type, Len: d.Len, CRC: d.CRC,
		Stamped: d.Stamped, StampLen: d.StampLen, StampCRC: d.StampCRC, Corrupt: d.Corrupt, Detail: d.Detail}
}

// digestView is v as the protocol sees it (without its Class).
func (v *View) digestView() logdigest.View {
	return logdigest.View{Present: v.Present, Term: v.Term, Type: v.Type, Len: v.Len, CRC: v.CRC,
		Stamped: v.Stamped, StampLen: v.StampLen, StampCRC: v.StampCRC, Corrupt: v.Corrupt, Detail: v.Detail}
}
