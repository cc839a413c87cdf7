package fsm

import (
	"encoding/binary"

	"github.com/tidwall/btree"
)

// maxSchedRecord bounds one schedule record in a snapshot: the template's
// payload, the zone's shifts, open job IDs, with room to spare.
const maxSchedRecord = MaxPayload + 64<<10 + MaxZoneShifts*20

// appendSchedRecords appends the snapshot's 'S' records, in ID order.
func appendSchedRecords(b []byte, t *btree.BTreeG[*schedEnt]) []byte {
	if t == nil {
		return b
	}
	var rec []byte
	t.Scan(func(e *schedEnt) bool {
		rec = appendSchedule(rec[:0], e.s)
		b = append(b, 'S')
		b = binary.AppendUvarint(b, uint64(len(rec)))
		b = append(b, rec...)
		return true
	})
	return b
}

// readSchedRecord reads one 'S' record's body into st, checking it and
// its order.
func readSchedRecord(cr *crcReader, st *state) error {
	n, err := readUvarint(cr)
	if err != nil {
		return err
	}
	if n > maxSchedRecord {
		return corrupt("schedule record of %d bytes", n)
	}
	rec := make([]byte, n)
	if err := cr.read(rec); err != nil {
		return err
	}
	d := decoder{b: rec}
	sc := decodeSchedule(&d)
	d.end()
	if d.err != nil {
		return corrupt("schedule record: %v", d.err)
	}
	if why := checkSchedule(sc); why != "" {
		return corrupt("schedule %q: %s", sc.ID, why)
	}
	if t := st.sch.tree; t != nil && t.Len() > 0 {
		if last, _ := t.Max(); last.s.ID >= sc.ID {
			return corrupt("schedule %q out of order", sc.ID)
		}
	}
	st.setSchedule(sc.ID, sc)
	return nil
}
