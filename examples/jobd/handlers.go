package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jobraft/jobraft"
)

// Result is what every built-in handler acks a job with: the execution
// record (which job, which member, which attempt) plus the handler's output.
// Counting results by job and member is how the demo proves each job
// completed exactly once.
type Result struct {
	Job     string `json:"job"`
	Member  string `json:"member"`
	Attempt uint32 `json:"attempt"`
	Handler string `json:"handler"`
	// Handler outputs.
	SHA256 string `json:"sha256,omitempty"`
	Bytes  int    `json:"bytes"`
	Echo   string `json:"echo,omitempty"`
	Slept  string `json:"slept,omitempty"`
	Output string `json:"output,omitempty"`
}

type handlerFunc func(ctx context.Context, job jobraft.Job, r *Result) error

// builtinHandlers are the job kinds every jobd runs.
var builtinHandlers = map[string]handlerFunc{
	// echo: the result carries the payload back (up to 4 KiB of it).
	"echo": func(_ context.Context, job jobraft.Job, r *Result) error {
		if len(job.Payload) > 4<<10 {
			return jobraft.Permanent(fmt.Errorf("echo: payload of %d bytes is above 4 KiB", len(job.Payload)))
		}
		r.Echo = string(job.Payload)
		return nil
	},
	// sha256: the hex SHA-256 of the payload.
	"sha256": func(_ context.Context, job jobraft.Job, r *Result) error {
		s := sha256.Sum256(job.Payload)
		r.SHA256 = hex.EncodeToString(s[:])
		return nil
	},
	// sleep: the payload is a duration ("250ms", at most 1h); the job is
	// canceled with its lease.
	"sleep": func(ctx context.Context, job jobraft.Job, r *Result) error {
		d, err := time.ParseDuration(strings.TrimSpace(string(job.Payload)))
		if err != nil || d < 0 || d > time.Hour {
			return jobraft.Permanent(errors.New("sleep: payload must be a duration in [0, 1h]"))
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			r.Slept = d.String()
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	},
	// fail: always fails (naks); for trying retries and dead jobs.
	"fail": func(_ context.Context, _ jobraft.Job, _ *Result) error {
		return errors.New("fail: this handler always fails")
	},
}

// shellHandler runs `sh -c command` with the payload on stdin and JOB_ID,
// JOB_QUEUE, JOB_ATTEMPT in the environment; stdout (at most 16 KiB) is
// the output. A non-zero exit naks the job. Only operators enable these
// (-exec kind=command): clients choose the kind, never the command.
func shellHandler(command string) handlerFunc {
	return func(ctx context.Context, job jobraft.Job, r *Result) error {
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		cmd.Stdin = bytes.NewReader(job.Payload)
		cmd.Env = append(cmd.Environ(), "JOB_ID="+job.ID, "JOB_QUEUE="+job.Queue,
			"JOB_ATTEMPT="+strconv.FormatUint(uint64(job.Attempts), 10))
		var out capped
		out.max = 16 << 10
		cmd.Stdout = &out
		cmd.WaitDelay = 2 * time.Second
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("exec %s: %w", job.Kind, err)
		}
		r.Output = out.b.String()
		return nil
	}
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// handlers wraps each handlerFunc into a jobraft.Handler that fills the
// execution record and counts executions.
func handlers(member string, exec map[string]string, m *metrics) map[string]jobraft.Handler {
	out := map[string]jobraft.Handler{}
	wrap := func(name string, h handlerFunc) jobraft.Handler {
		return func(ctx context.Context, job jobraft.Job) ([]byte, error) {
			start := time.Now()
			r := Result{Job: job.ID, Member: member, Attempt: job.Attempts, Handler: name, Bytes: len(job.Payload)}
			err := h(ctx, job, &r)
			m.observeExecution(name, err, time.Since(start))
			if err != nil {
				return nil, err
			}
			return json.Marshal(r)
		}
	}
	for name, h := range builtinHandlers {
		out[name] = wrap(name, h)
	}
	for kind, command := range exec {
		out[kind] = wrap(kind, shellHandler(command))
	}
	return out
}
