package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/jobraft/jobraft/examples/client"
)

// The limit commands (jobd's api_limits.go) and submit's unique flags.

func uniqueFlags(fs *flag.FlagSet) {
	fs.BoolVar(&fUnique, "unique", false, "unique by (queue, kind, payload): a job holding the key is answered instead")
	fs.DurationVar(&fUniquePeriod, "unique-period", 0, "with -unique: one job per key per period window of log time (0: none)")
	fs.StringVar(&fUniqueStates, "unique-states", "", "with -unique: the finished states in which a job also holds its key, comma-separated: succeeded, dead, canceled (default succeeded; it always holds it until it finishes)")
}

// uniqueOpts is submit's unique options from the flags (nil without
// -unique).
func uniqueOpts() (*client.UniqueOpts, error) {
	if !fUnique {
		if fUniquePeriod != 0 || fUniqueStates != "" {
			return nil, usagef("-unique-period and -unique-states need -unique")
		}
		return nil, nil
	}
	u := &client.UniqueOpts{Period: client.Duration(fUniquePeriod)}
	if fUniqueStates != "" {
		u.States = strings.Split(fUniqueStates, ",")
	}
	return u, nil
}

func limitSet(ctx context.Context, e *env, args []string) error {
	if len(args) != 2 {
		return usagef("limit takes QUEUE MAX, got %q", args)
	}
	max, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return usagef("MAX %q is not a whole number", args[1])
	}
	l, err := e.c.SetLimit(ctx, args[0], fKind, max)
	return limitLine(e, l, err)
}

func limitClear(ctx context.Context, e *env, args []string) error {
	q, err := oneArg(args, "the queue")
	if err != nil {
		return err
	}
	l, err := e.c.ClearLimit(ctx, q, fKind)
	return limitLine(e, l, err)
}

func rateSet(ctx context.Context, e *env, args []string) error {
	if len(args) != 2 {
		return usagef("rate takes QUEUE PER-SECOND, got %q", args)
	}
	r, err := strconv.ParseFloat(args[1], 64)
	if err != nil {
		return usagef("PER-SECOND %q is not a number", args[1])
	}
	l, err := e.c.SetRate(ctx, args[0], r, fCount)
	return limitLine(e, l, err)
}

func rateClear(ctx context.Context, e *env, args []string) error {
	q, err := oneArg(args, "the queue")
	if err != nil {
		return err
	}
	l, err := e.c.ClearRate(ctx, q)
	return limitLine(e, l, err)
}

// limitLine prints a queue's limits after a change.
func limitLine(e *env, l client.QueueLimits, err error) error {
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, l)
	}
	fmt.Fprintf(e.out, "queue %s: %s\n", l.Queue, limitText(l))
	return nil
}

// limitText says a queue's limits in one line.
func limitText(l client.QueueLimits) string {
	if l.Unread {
		return "changed; its limits could not be read after the change (see jobctl limits)"
	}
	var parts []string
	if l.Max > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d running", l.Running, l.Max))
	}
	for _, k := range l.Kinds {
		parts = append(parts, fmt.Sprintf("kind %s %d of %d running", k.Kind, k.Running, k.Max))
	}
	if r := l.Rate; r != nil {
		parts = append(parts, fmt.Sprintf("%.4g jobs/s, burst %d, %d tokens now", r.PerSecond, r.Burst, r.Tokens))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, "; ")
}

func limitsCmd(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return usagef("limits takes no arguments")
	}
	ls, err := e.c.Limits(ctx)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e, client.LimitsReply{Limits: ls})
	}
	t := newTable(e.out)
	t.row("QUEUE", "LIMITS", "HELD BACK (CONCURRENCY)", "HELD BACK (RATE)")
	for _, l := range ls {
		t.row(l.Queue, limitText(l), l.Limited, l.RateLimited)
	}
	return t.flush()
}
