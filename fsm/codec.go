package fsm

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Primitive encoding shared by commands, results and snapshots:
// unsigned integers are uvarints, signed ones zig-zag varints, strings and
// byte slices a uvarint length followed by the bytes, times int64 unix
// nanoseconds as varints (0 = unset), durations nanoseconds as varints.

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// decoder reads primitives from a byte slice. The first error sticks; every
// read after it returns zero values, so callers check err once at the end.
// Lengths are bounded by the remaining input, so a hostile length prefix
// can never cause a large allocation.
type decoder struct {
	b   []byte
	err error
	// arena, when pooled is set, holds copies of strings: one allocation
	// per arenaChunk bytes instead of one per string. A string kept keeps
	// its chunk alive (at most arenaChunk bytes of its neighbours'
	// strings, never payloads), never the input.
	arena  []byte
	pooled bool
	// noPayload: job records' payloads are skipped, not copied.
	noPayload bool
	// view: strings and bytes are views of the input, not copies (for a
	// reader that looks at them while the input is alive and unchanged).
	view bool
}

// arenaChunk bounds a decoder's arena chunks; strings above arenaMax
// bytes get their own allocation.
const (
	arenaChunk = 4 << 10
	arenaMax   = 512
)

// keep returns a copy of p that nobody else writes: in the arena when
// pooled and short, else its own allocation.
func (d *decoder) keep(p []byte) []byte {
	if !d.pooled || len(p) > arenaMax {
		return append([]byte(nil), p...)
	}
	if cap(d.arena)-len(d.arena) < len(p) {
		// No larger than what is left to decode could need.
		d.arena = make([]byte, 0, min(arenaChunk, len(p)+len(d.b)))
	}
	at := len(d.arena)
	d.arena = append(d.arena, p...)
	return d.arena[at:len(d.arena):len(d.arena)]
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidCommand}, args...)...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bool reads a byte that must be 0 or 1.
func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bool byte not 0 or 1")
	return false
}

// u64 reads 8 bytes, big endian.
func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail("value %d overflows uint32", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) i32() int32 {
	v := d.varint()
	if v < -1<<31 || v > 1<<31-1 {
		d.fail("value %d overflows int32", v)
		return 0
	}
	return int32(v)
}

// raw returns the next length-prefixed bytes without copying.
func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d beyond input (%d left)", n, len(d.b))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string {
	p := d.raw()
	if d.view && len(p) > 0 {
		return unsafe.String(&p[0], len(p))
	}
	if !d.pooled || len(p) == 0 {
		return string(p)
	}
	k := d.keep(p) // never written again: safe to view as a string
	return unsafe.String(&k[0], len(k))
}

// bytes returns a copy of the next length-prefixed bytes (nil when empty),
// in an allocation of its own.
func (d *decoder) bytes() []byte {
	p := d.raw()
	if len(p) == 0 {
		return nil
	}
	if d.view {
		return p
	}
	return append([]byte(nil), p...)
}

// count reads a collection length and checks it against max and against
// the input left (each element takes at least minSize bytes).
func (d *decoder) count(max, minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(max) {
		if d.err == nil {
			d.err = fmt.Errorf("%w: %d elements, at most %d", ErrTooLarge, n, max)
		}
		return 0
	}
	if n*uint64(minSize) > uint64(len(d.b)) {
		d.fail("%d elements cannot fit in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) end() {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
}
