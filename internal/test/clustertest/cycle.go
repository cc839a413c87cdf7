package clustertest

import (
	"context"
	"fmt"
	"time"

	"github.com/jobraft/jobraft"
)

// LastIndex is ctl's last log index: what the log grew by is the
// difference of two of them.
func LastIndex(ctl *jobraft.Controller) uint64 { return ctl.Node().Raft().LastIndex() }

// Cycle runs one full job cycle on ctl: a job submitted to queue q with
// payload, claimed (waiting up to a second) and acked.
func Cycle(ctx context.Context, ctl *jobraft.Controller, q string, payload []byte) error {
	if _, err := ctl.Submit(ctx, jobraft.SubmitRequest{Queue: q, Kind: "k", Payload: payload}); err != nil {
		return err
	}
	ls, err := ctl.Claim(ctx, jobraft.ClaimRequest{Queues: []string{q}, Worker: "w", Wait: time.Second})
	if err != nil || len(ls) != 1 {
		return fmt.Errorf("claim: %d, %v", len(ls), err)
	}
	return ls[0].Ack(ctx, nil)
}
