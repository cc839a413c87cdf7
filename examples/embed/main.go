// Command embed is the README's embedding example: a one-member jobraft
// Controller with a worker, one submitted job and its result. The README
// quotes run; main_test.go runs it.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

func main() {
	dir, err := os.MkdirTemp("", "jobraft-embed-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	out, err := run(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
}

func run(ctx context.Context, dir string) (string, error) {
	ctl, err := jobraft.Open(ctx, jobraft.Config{
		Config: raft.Config{
			ID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true,
			// Three members: list them all here, on every member.
			// InitialMembers: []raft.Member{{ID: "n1", Address: "10.0.0.1:7400", Voter: true}, ...},
		},
		LeaseTTL: 30 * time.Second,
	})
	if err != nil {
		return "", err
	}
	defer ctl.Close(context.Background())

	// Workers: handlers per kind, concurrency per queue. Handlers must be
	// idempotent: a job runs at least once.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go ctl.Run(wctx, jobraft.WorkerConfig{
		Queues: map[string]int{"emails": 4},
		Handlers: map[string]jobraft.Handler{
			"upper": func(ctx context.Context, job jobraft.Job) ([]byte, error) {
				return []byte(strings.ToUpper(string(job.Payload))), nil
			},
		},
	})

	// Submit on any member; the ID makes retries exactly-once.
	job, err := ctl.Submit(ctx, jobraft.SubmitRequest{ID: "welcome-42", Queue: "emails", Kind: "upper", Payload: []byte("hello")})
	if err != nil {
		return "", err // errors.Is(err, jobraft.ErrMayExist): resubmit with the same ID
	}
	if job.Duplicate {
		log.Printf("job %s existed already", job.ID)
	}

	// Wait for the job's outcome (succeeded, dead or canceled).
	done, err := ctl.Wait(ctx, job.ID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: %s", done.ID, done.State, done.Result), nil
}
