package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jobraft/jobraft/examples/client"
)

// batch [ID]: one batch's progress, or every batch's.
func batchCmd(ctx context.Context, e *env, args []string) error {
	if len(args) > 1 {
		return usagef("batch takes at most one batch ID (got %q)", args)
	}
	var bs []client.Batch
	if len(args) == 1 {
		b, err := e.c.GetBatch(ctx, args[0])
		if err != nil {
			return err
		}
		bs = append(bs, b)
	} else {
		all, err := e.c.ListBatches(ctx)
		if err != nil {
			return err
		}
		bs = all
	}
	if e.g.json {
		if len(args) == 1 {
			return printJSON(e, bs[0])
		}
		return printJSON(e, bs)
	}
	for _, b := range bs {
		fmt.Fprintln(e.out, batchLine(b))
	}
	return nil
}

// batchLine is a batch in one line: its progress by state, then its
// completion.
func batchLine(b client.Batch) string {
	states := make([]string, 0, len(b.Counts))
	for st, n := range b.Counts {
		states = append(states, fmt.Sprintf("%s %d", st, n))
	}
	sort.Strings(states)
	done := "open"
	if b.Done {
		done = fmt.Sprintf("completed %s: %d succeeded, %d failed", b.Completed.Format("2006-01-02T15:04:05Z07:00"), b.Succeeded, b.Failed)
		if b.CompletionJob != "" {
			done += ", completion job " + b.CompletionJob
		}
	}
	return fmt.Sprintf("%s: %d members (%s); %s", b.ID, b.Members, strings.Join(states, ", "), done)
}

// dependents ID: the jobs naming ID as a parent.
func dependents(ctx context.Context, e *env, args []string) error {
	id, err := oneArg(args, "the job ID")
	if err != nil {
		return err
	}
	ids, err := e.c.Dependents(ctx, id)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, ids)
	}
	for _, d := range ids {
		fmt.Fprintln(e.out, d)
	}
	return nil
}
