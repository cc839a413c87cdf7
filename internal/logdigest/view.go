package logdigest

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

// View is one stored entry as the protocol sees it: what is stored, never
// the payload. Its JSON form is part of the wire format.
type View struct {
	// Present: the member holds a record at the index (possibly corrupt).
	Present bool         `json:"present"`
	Term    uint64       `json:"term,omitempty"`
	Type    raft.LogType `json:"type"`
	// Len and CRC describe the stored payload (Data): its length and its
	// CRC32C, computed.
	Len uint32 `json:"len"`
	CRC uint32 `json:"crc"`
	// Stamped: the entry carries a payload stamp, saying the length and
	// CRC32C the payload had when it was proposed.
	Stamped  bool   `json:"stamped,omitempty"`
	StampLen uint32 `json:"stamp_len,omitempty"`
	StampCRC uint32 `json:"stamp_crc,omitempty"`
	// Corrupt: the stored record fails its own checks or cannot be read;
	// Detail says where and why (never payload bytes).
	Corrupt bool   `json:"corrupt,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Lost reports a lost payload: an intact record with an empty body under a
// non-empty stamp.
func (v *View) Lost() bool {
	return v.Present && !v.Corrupt && v.Len == 0 && v.Stamped && v.StampLen > 0
}

// ReadView reads index ix of s into v, using l as scratch; it reports
// false when s does not hold ix (raft.ErrLogNotFound). Any other GetLog
// error makes v Corrupt with the error's text as Detail, except a
// *wal.GuardError refusing an empty body under a non-empty stamp, which
// makes v a lost payload (the stamp from the guard's diagnostic). A body
// that does not match its own stamp is Corrupt too.
func ReadView(s raft.LogStore, ix uint64, l *raft.Log, v *View) bool {
	*l = raft.Log{}
	err := s.GetLog(ix, l)
	if errors.Is(err, raft.ErrLogNotFound) {
		return false
	}
	*v = View{Present: true}
	if err != nil {
		var g *wal.GuardError
		if errors.As(err, &g) && errors.Is(err, wal.ErrPayloadMismatch) && g.StoredLen == 0 && g.ExpectedLen > 0 {
			// wal refuses to return a lost payload; its diagnostic says
			// what is stored.
			v.Term, v.Stamped, v.StampLen, v.StampCRC = g.Term, true, g.ExpectedLen, g.ExpectedCRC
			v.CRC = segment.Checksum(nil)
			return true
		}
		v.Corrupt, v.Detail = true, err.Error()
		if g != nil {
			v.Term = g.Term
		}
		return true
	}
	fillView(v, l)
	return true
}

// fillView sets v from an entry read whole.
func fillView(v *View, l *raft.Log) {
	v.Term, v.Type = l.Term, l.Type
	v.Len, v.CRC = uint32(len(l.Data)), segment.Checksum(l.Data)
	if st, ok := segment.ParseStamp(l.Extensions); ok {
		v.Stamped, v.StampLen, v.StampCRC = true, st.Len, st.CRC
		if v.Len != 0 && (v.Len != st.Len || v.CRC != st.CRC) {
			v.Corrupt = true
			v.Detail = fmt.Sprintf("payload (len %d crc %08x) does not match its stamp (len %d crc %08x)", v.Len, v.CRC, st.Len, st.CRC)
		}
	}
}
