package fsm

import (
	"testing"

	"pgregory.net/rapid"
)

// The job-ID tree's order, (prefix, ID), is ID order, for IDs of any
// length and bytes (zero bytes and prefixes of each other included).
func TestIDEntOrderIsIDOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.StringOfN(rapid.SampledFrom([]rune{0, 1, 'a', 'b', 0x7f, 'é'}), 0, 12, -1)
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		ea, eb := entOf(&slot{j: &job{id: a}}), entOf(&slot{j: &job{id: b}})
		if idLess(ea, eb) != (a < b) || idLess(eb, ea) != (b < a) {
			t.Fatalf("%q < %q is %v, idLess says %v", a, b, a < b, idLess(ea, eb))
		}
	})
}
