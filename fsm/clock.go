package fsm

import "encoding/binary"

// logClock is the state machine's time: a function of the log alone, so
// every member computes the same one, and it never goes backwards.
//
// Each command entry carries the proposing leader's clock (Entry.Time, its
// "stamp"). Stamps alone are not a usable time: a new leader whose clock is
// behind its predecessor's stamps earlier than entries already applied, and
// a leader whose clock is stepped back (NTP) does the same within its term.
// A job nak'd with a one-second delay, due by the old leader's time, would
// then stop being due, and a claim made after the delay passed would find
// nothing. The log clock instead:
//
//   - at the first entry of a term, starts at the later of the stamp and one
//     nanosecond past the log time so far: a leader never moves time
//     backwards (nor holds it: what was due at the last entry of the old
//     term, even one nanosecond after it, is due at the first of the new),
//     a fast one moves it on;
//   - within a term, advances by exactly as much as the leader's stamps rise
//     above the highest stamp seen in the term: it runs at the leader's rate,
//     a step back of its clock pauses it until the clock has caught up, and
//     stamps that concurrent proposals put out of order count once.
//
// So within one term, log time elapsed never exceeds the leader's own clock
// elapsed; that is what lease expiry relies on (see ExpireCmd). Log time may
// run ahead of a slow leader's clock by a constant for the whole term. Two
// entries of one term get the same log time only when the second's stamp
// is not past every earlier stamp of the term: proposals racing each other,
// or the leader's clock stepped back.
type logClock struct {
	now    int64  // log time of the last entry, unix ns
	term   uint64 // term of the last entry (0: none yet)
	stamp  int64  // the highest stamp seen in term
	office int64  // log time of term's first entry: the leader's start in office
}

// advance moves the clock to an entry of term stamped at stamp and returns
// the entry's log time.
func (c *logClock) advance(term uint64, stamp int64) int64 {
	if term != c.term || c.term == 0 {
		c.term, c.stamp = term, stamp
		c.now = max(addSat(c.now, 1), stamp)
		c.office = c.now
		return c.now
	}
	if stamp > c.stamp {
		c.now = addSat(c.now, stamp-c.stamp)
		c.stamp = stamp
	}
	return c.now
}

// at returns the log time an entry stamped at stamp would get in the
// current term: a reading of the leader's clock translated into log time.
// On a follower, whose clock is not the leader's, it is an estimate off by
// the two clocks' offset.
func (c *logClock) at(stamp int64) int64 {
	switch {
	case c.term == 0: // nothing applied yet: the stamp is all there is
		return stamp
	case stamp <= c.stamp:
		return c.now
	}
	return addSat(c.now, stamp-c.stamp)
}

// clockSize is the clock's encoded size in snapshots and the digest.
const clockSize = 32

// append encodes the clock: now, term, stamp, office, 8 bytes each, big
// endian (the digest's byte order; snapshots store the same bytes).
func (c *logClock) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(c.now))
	b = binary.BigEndian.AppendUint64(b, c.term)
	b = binary.BigEndian.AppendUint64(b, uint64(c.stamp))
	return binary.BigEndian.AppendUint64(b, uint64(c.office))
}

// decodeClock reads what append wrote; office and now may not precede the
// term's first entry (office <= now), the only relation the clock keeps.
func decodeClock(b []byte) (logClock, bool) {
	c := logClock{
		now:    int64(binary.BigEndian.Uint64(b)),
		term:   binary.BigEndian.Uint64(b[8:]),
		stamp:  int64(binary.BigEndian.Uint64(b[16:])),
		office: int64(binary.BigEndian.Uint64(b[24:])),
	}
	return c, c.office <= c.now
}
