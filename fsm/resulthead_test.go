package fsm_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// ResultHead reads the command type and code of what Apply returned, for a
// command applied and one refused, and refuses bytes too short to be a
// result.
func TestResultHead(t *testing.T) {
	j := fsm.New()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apply := func(index uint64, c fsm.Command) []byte {
		t.Helper()
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		return j.Apply(fsm.Entry{Index: index, Term: 1, Time: at, Cmd: b})
	}
	sub := apply(1, &fsm.SubmitCmd{Jobs: []fsm.NewJob{{ID: "a", Queue: "q", Kind: "k"}}})
	if cmd, code, ok := fsm.ResultHead(sub); !ok || cmd != fsm.CmdSubmit || code != fsm.CodeOK {
		t.Fatalf("submit: %v %v %v", cmd, code, ok)
	}
	ack := apply(2, &fsm.AckCmd{ID: "a", Token: 99})
	if cmd, code, ok := fsm.ResultHead(ack); !ok || cmd != fsm.CmdAck || code == fsm.CodeOK {
		t.Fatalf("refused ack: %v %v %v", cmd, code, ok)
	}
	for _, b := range [][]byte{nil, {fsm.ResultVersion}, {fsm.ResultVersion, byte(fsm.CmdSubmit)}} {
		if _, _, ok := fsm.ResultHead(b); ok {
			t.Fatalf("ResultHead(%d bytes) ok", len(b))
		}
	}
}
