package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jobraft/jobraft/examples/client"
)

// claim leases jobs by hand, as a worker does: jobctl ack, nak, extend and
// term settle them with the token it prints.
func claim(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("claim takes no arguments (got %q); the queues are given with -queue", args)
	}
	if err := missing("-queue", fQueue); err != nil {
		return err
	}
	worker := fWorker
	if worker == "" {
		host, _ := os.Hostname()
		worker = "jobctl@" + host
	}
	leases, err := e.c.Claim(ctx, client.ClaimRequest{Queues: strings.Split(fQueue, ","), Worker: worker, Max: fCount,
		LeaseTTL: client.Duration(fLeaseTTL), Wait: client.Duration(fWait)})
	if err != nil {
		return err
	}
	if e.g.json {
		if leases == nil {
			leases = []client.Claimed{}
		}
		return printJSON(e, leases)
	}
	if len(leases) == 0 {
		fmt.Fprintf(e.out, "nothing to claim in %s\n", fQueue)
		return nil
	}
	t := newTable(e.out)
	t.row("ID", "TOKEN", "QUEUE", "KIND", "ATTEMPT", "DEADLINE", "PAYLOAD")
	for _, l := range leases {
		t.row(l.Job.ID, l.Token, l.Job.Queue, l.Job.Kind, l.Job.Attempts, l.Deadline.Format(time.RFC3339), bytesText(l.Job.Payload, l.Job.PayloadText))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "settle with: jobctl ack ID -lease TOKEN -result TEXT (or nak, extend, term)\n")
	return nil
}

// settle returns the command of a lease operation: ack, nak, extend, term.
func settle(op string) func(ctx context.Context, e *env, args []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		id, err := oneArg(args, "the job ID")
		if err != nil {
			return err
		}
		if fToken == 0 {
			return usagef("missing -lease TOKEN (the lease's token, as claim printed it)")
		}
		req := client.SettleRequest{Token: fToken, Delay: client.Duration(fDelay), Error: fError, Reason: fReason}
		if op == "ack" {
			switch {
			case fResult != "" && fResultFile != "":
				return usagef("give -result or -result-file, not both")
			case fResultFile == "-":
				req.Result, err = readAll(os.Stdin)
			case fResultFile != "":
				if req.Result, err = os.ReadFile(fResultFile); err != nil {
					return usagef("-result-file: %v", err)
				}
			case fResult != "":
				req.Result = []byte(fResult)
			}
			if err != nil {
				return err
			}
		}
		s, err := e.c.Settle(ctx, id, op, req)
		if err != nil {
			return err
		}
		if e.g.json {
			return printJSON(e, s)
		}
		done := map[string]string{"ack": "acked", "nak": "naked", "extend": "extended", "term": "termed"}[op]
		state := s.State
		if state == "" {
			state = "unknown (the read after it failed: jobctl get " + id + ")"
		}
		fmt.Fprintf(e.out, "%s %s (lease token %d); job state %s", id, done, s.Token, state)
		if !s.Deadline.IsZero() {
			fmt.Fprintf(e.out, "; lease until %s", s.Deadline.Format(time.RFC3339))
		}
		fmt.Fprintln(e.out)
		return nil
	}
}
