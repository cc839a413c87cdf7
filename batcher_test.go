package jobraft_test

import (
	"testing"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/ctltest"
)

// TestBatchingNeverExceedsMaxCommandSize: with a MaxCommandSize below the
// default BatchMaxBytes, concurrent submits that each fit were batched
// into an entry the node refuses as too large, and every one of them
// failed ErrNotSubmitted.
func TestBatchingNeverExceedsMaxCommandSize(t *testing.T) {
	c := ctltest.Start(t, 3, func(i int, cfg *jobraft.Config) { cfg.MaxCommandSize = 64 << 10 })
	l := c.WaitLeader(wait)
	ctx := ctltest.Ctx(t, wait)
	const clients = 32
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		go func() {
			_, err := c.Ctls[l].Submit(ctx, jobraft.SubmitRequest{Queue: "big", Kind: "k", Payload: make([]byte, 8<<10)})
			errs <- err
		}()
	}
	for i := 0; i < clients; i++ {
		if err := <-errs; err != nil {
			t.Errorf("submit of a job that fits MaxCommandSize: %v", err)
		}
	}
}
