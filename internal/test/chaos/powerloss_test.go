package chaos

import (
	"strings"
	"testing"
)

// A power loss keeps what its member applied when its log or its newest
// snapshot reaches the applied index it reported; a log and snapshots that
// end below it (a log directory lost with its fsynced segments) are named.
func TestPowerLossKeptWhatItApplied(t *testing.T) {
	for _, c := range []struct {
		l    loss
		kept bool
	}{
		{loss{m: 1, applied: 120, last: 133}, true},
		{loss{m: 1, applied: 120, last: 120}, true},
		{loss{m: 1, applied: 300, last: 0, snap: 300}, true}, // the log reset after an install
		{loss{m: 1, applied: 300, last: 290, snap: 256}, false},
		{loss{m: 2, applied: 57, last: 0, snap: 0}, false}, // the log gone
		{loss{m: 2, applied: 0}, true},
	} {
		v, ok := c.l.kept()
		if ok != c.kept {
			t.Errorf("%+v: kept %v, want %v (%s)", c.l, ok, c.kept, v)
		}
		if !ok && (v.Checker != "powerloss" || v.Index != c.l.applied || len(v.Members) != 1 || v.Members[0] != c.l.m ||
			!strings.Contains(v.Detail, "lost entries it had applied")) {
			t.Errorf("%+v: verdict %+v", c.l, v)
		}
	}
}
