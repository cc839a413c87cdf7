package raft

import (
	"encoding/binary"
	"errors"
	"time"
)

// A command travels in an envelope the leader fills at proposal:
//
//	0  u8   envelope version (1)
//	1  i64  the leader's clock, unix nanoseconds, little endian
//	9  ...  the caller's command
//
// The state machine receives the time as Entry.Time and the command as
// Entry.Cmd. The entry's payload stamp (segment.Stamp) covers the envelope.
const (
	envelopeVersion = 1
	envelopeSize    = 9
)

var errBadEnvelope = errors.New("raft: malformed command envelope")

func seal(now time.Time, cmd []byte) []byte {
	b := make([]byte, envelopeSize, envelopeSize+len(cmd))
	return append(sealInPlace(now, b), cmd...)
}

// sealInPlace writes the envelope into the first envelopeSize bytes of b
// (the command follows them) and returns b.
func sealInPlace(now time.Time, b []byte) []byte {
	b[0] = envelopeVersion
	binary.LittleEndian.PutUint64(b[1:], uint64(now.UnixNano()))
	return b
}

func open(b []byte) (time.Time, []byte, error) {
	if len(b) < envelopeSize || b[0] != envelopeVersion {
		return time.Time{}, nil, errBadEnvelope
	}
	return time.Unix(0, int64(binary.LittleEndian.Uint64(b[1:]))).UTC(), b[envelopeSize:], nil
}
