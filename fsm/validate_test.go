package fsm_test

import (
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

// Validate refuses exactly what EncodeCommand refuses, with the same
// error, for valid and invalid commands, values and pointers alike.
func TestValidateAgreesWithEncode(t *testing.T) {
	for _, c := range []fsm.Command{
		nil,
		&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute},
		fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute},
		&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 0, TTL: time.Minute},
		&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "", Max: 1, TTL: time.Minute},
		&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: -time.Second},
		&fsm.ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Minute, Kinds: make([]string, fsm.MaxClaimKinds+1)},
		&fsm.AckCmd{ID: "a", Token: 1},
		&fsm.AckCmd{ID: "", Token: 1},
		&fsm.SubmitCmd{Jobs: []fsm.NewJob{{ID: "a", Queue: "q", Kind: ""}}},
	} {
		_, encErr := fsm.EncodeCommand(c)
		err := fsm.Validate(c)
		if (err == nil) != (encErr == nil) || (err != nil && err.Error() != encErr.Error()) {
			t.Errorf("%#v: Validate %v, EncodeCommand %v", c, err, encErr)
		}
	}
}
