// Command embed is the README's embedding example: a one-member jobraft
// Controller with a worker, one submitted job and its result, typed (the
// host handles no payload bytes). The README quotes it whole; main_test.go
// runs it.
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

// Upper is a job's arguments and its result: a kind names the type, and
// the arguments travel as JSON (jobraft.Kind.WithCodec plugs in another
// codec).
type Upper struct {
	Text string `json:"text"`
}

var upper = jobraft.NewKind[Upper]("upper")

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
			upper.Name(): jobraft.Handle(upper, func(ctx context.Context, job jobraft.Job, in Upper) (Upper, error) {
				return Upper{Text: strings.ToUpper(in.Text)}, nil
			}),
		},
	})

	// Submit on any member; the ID makes retries exactly-once.
	job, err := upper.Submit(ctx, ctl, jobraft.SubmitRequest{ID: "welcome-42", Queue: "emails"}, Upper{Text: "hello"})
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
	out, err := jobraft.ResultOf[Upper](upper, done) // a dead job has no result: an error
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: %s", done.ID, done.State, out.Text), nil
}
