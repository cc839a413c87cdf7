package fsm

import (
	"fmt"
	"testing"
	"time"
)

// EncodeCommand writes a submit into a buffer of exactly its encoded size
// (commandSizeHint): one allocation, never grown while it is written.
func TestEncodeSubmitOneExactBuffer(t *testing.T) {
	for _, n := range []int{1, 16, 300} {
		cmd := &SubmitCmd{}
		for i := range n {
			cmd.Jobs = append(cmd.Jobs, NewJob{ID: fmt.Sprint("job-", i), Queue: "q", Kind: "k", Payload: make([]byte, 256+i),
				Priority: int32(i - 50), RunAt: baseTime.Add(time.Duration(i) * time.Second), MaxAttempts: uint32(i),
				Backoff: Backoff{Base: time.Second, Max: time.Hour, Factor: 2000, Jitter: 3}, IdempotencyKey: fmt.Sprint("key", i)})
		}
		b, err := EncodeCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if cap(b) != len(b) || commandSizeHint(cmd) != len(b) {
			t.Fatalf("%d jobs: %d bytes in a buffer of %d (hint %d)", n, len(b), cap(b), commandSizeHint(cmd))
		}
		if allocs := testing.AllocsPerRun(20, func() { _, _ = EncodeCommand(cmd) }); allocs != 1 {
			t.Fatalf("%d jobs: %.0f allocations per encode, want 1", n, allocs)
		}
	}
}
