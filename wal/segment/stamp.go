package segment

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/hashicorp/raft"
)

// The stamp is a trailer of raft.Log.Extensions, so it travels with the entry
// through replication and is stored with it (a persist stamp, which the
// store added itself, is stored but never returned by GetLog):
//
//	+---------+---------+--------+-----------+
//	| len u32 | crc u32 | origin | "jrS1"    |
//	+---------+---------+--------+-----------+
//	  0         4         8        9..12        (little endian)
//
// len is the payload (Data) length, crc its CRC32C (Castagnoli). origin says
// who stamped it: the proposing leader (StampProposal) or the store at
// persist time for entries that arrived unstamped (StampPersist). Bytes in
// Extensions before the trailer belong to other middleware and are kept.
const (
	stampSize = 13
	// StampProposal marks a stamp added by the proposer (wal.Stamp).
	StampProposal byte = 1
	// StampPersist marks a stamp added by the store when an entry arrived
	// without one (raft's own no-op, configuration and barrier entries).
	StampPersist byte = 2
)

var (
	stampMagic = []byte("jrS1")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// Checksum returns the CRC32C (Castagnoli) of b, the checksum used by stamps,
// records and walcompare.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// StampInfo is a decoded stamp.
type StampInfo struct {
	Len    uint32
	CRC    uint32
	Origin byte
}

// Stamp puts a CRC32C of l.Data into l.Extensions, replacing an existing
// stamp. The leader calls it on every command at proposal.
func Stamp(l *raft.Log) { stampWith(l, StampProposal) }

func stampWith(l *raft.Log, origin byte) {
	ext := l.Extensions
	if _, ok := ParseStamp(ext); ok {
		ext = ext[:len(ext)-stampSize]
	}
	out := make([]byte, len(ext), len(ext)+stampSize)
	copy(out, ext)
	out = appendStamp(out, uint32(len(l.Data)), Checksum(l.Data), origin)
	l.Extensions = out
}

// StripPersistStamp removes a stamp the store added (StampPersist) from
// l.Extensions, without touching the bytes it shares with the store (nil
// when nothing else was there, as the entry arrived).
func StripPersistStamp(l *raft.Log) {
	if st, ok := ParseStamp(l.Extensions); ok && st.Origin == StampPersist {
		l.Extensions = l.Extensions[: len(l.Extensions)-stampSize : len(l.Extensions)-stampSize]
		if len(l.Extensions) == 0 {
			l.Extensions = nil
		}
	}
}

func appendStamp(b []byte, n, crc uint32, origin byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, n)
	b = binary.LittleEndian.AppendUint32(b, crc)
	b = append(b, origin)
	return append(b, stampMagic...)
}

// ParseStamp decodes the stamp trailer of ext, if there is one.
func ParseStamp(ext []byte) (StampInfo, bool) {
	if len(ext) < stampSize || !bytes.Equal(ext[len(ext)-4:], stampMagic) {
		return StampInfo{}, false
	}
	t := ext[len(ext)-stampSize:]
	s := StampInfo{
		Len:    binary.LittleEndian.Uint32(t[0:4]),
		CRC:    binary.LittleEndian.Uint32(t[4:8]),
		Origin: t[8],
	}
	if s.Origin != StampProposal && s.Origin != StampPersist {
		return StampInfo{}, false
	}
	return s, true
}

// VerifyStamp checks l.Data against the stamp in l.Extensions. It returns nil
// when they match, a *GuardError wrapping ErrUnstamped when there is no
// stamp, and one wrapping ErrPayloadMismatch when the body differs from what
// was stamped — including an empty body where the stamp says it had one.
func VerifyStamp(l *raft.Log) error {
	return verifyStamp(OpStore, l)
}

func verifyStamp(op Op, l *raft.Log) error {
	s, ok := ParseStamp(l.Extensions)
	if !ok {
		return &GuardError{Op: op, Err: ErrUnstamped, Index: l.Index, Term: l.Term,
			ExpectedLen: uint32(len(l.Data)), Detail: "no stamp in extensions"}
	}
	n := uint32(len(l.Data))
	crc := Checksum(l.Data)
	if n == s.Len && crc == s.CRC && uint64(len(l.Data)) <= 0xFFFFFFFF {
		return nil
	}
	detail := "body differs from its stamp"
	if n == 0 && s.Len != 0 {
		detail = "empty body under a non-empty stamp (payload lost)"
	}
	return &GuardError{Op: op, Err: ErrPayloadMismatch, Index: l.Index, Term: l.Term,
		StoredTerm: l.Term, ExpectedTerm: l.Term, TermEqual: true,
		StoredLen: n, ExpectedLen: s.Len, LenEqual: n == s.Len,
		StoredCRC: crc, ExpectedCRC: s.CRC, CRCEqual: crc == s.CRC,
		Detail: detail}
}

func crcUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// StampMissing returns entries with a persist stamp added to every entry
// that has none, copying those entries (never modifying the caller's).
func StampMissing(entries []*raft.Log) []*raft.Log {
	var out []*raft.Log
	for i, e := range entries {
		if _, ok := ParseStamp(e.Extensions); ok {
			if out != nil {
				out = append(out, e)
			}
			continue
		}
		if out == nil {
			out = make([]*raft.Log, i, len(entries))
			copy(out, entries[:i])
		}
		c := *e
		stampWith(&c, StampPersist)
		out = append(out, &c)
	}
	if out == nil {
		return entries
	}
	return out
}
