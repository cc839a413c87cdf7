package jobraft_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/test/clustertest"
)

type upperArgs struct {
	Text string `json:"text"`
}

type upperResult struct {
	Upper string `json:"upper"`
	Len   int    `json:"len"`
}

// errCodec is a codec's own refusal.
var errCodec = errors.New("codec refused")

// refusingCodec refuses to encode or decode anything.
type refusingCodec struct{}

func (refusingCodec) Marshal(any) ([]byte, error) { return nil, errCodec }
func (refusingCodec) Unmarshal([]byte, any) error { return errCodec }

// lineCodec is a pluggable codec of its own: a string argument as the
// payload's bytes, prefixed.
type lineCodec struct{}

func (lineCodec) Marshal(v any) ([]byte, error) { return []byte("line:" + v.(string)), nil }
func (lineCodec) Unmarshal(b []byte, v any) error {
	s, ok := strings.CutPrefix(string(b), "line:")
	if !ok {
		return errors.New("not a line")
	}
	*v.(*string) = s
	return nil
}

// secret is in every payload below that must not decode: no error text
// may quote it.
const secret = "SECRET-PAYLOAD-BYTES"

// Typed jobs through a real 3-member cluster: arguments submitted on one
// member, handled by a typed worker on another, the typed result read back
// on a third; a payload that does not decode as the kind's arguments is
// termed at once (the function never runs), its reason naming no payload
// byte; a codec that refuses is a typed error, before anything is
// proposed on submit, a termed job on decode.
func TestTypedJobsThroughACluster(t *testing.T) {
	c := clustertest.StartCtls(t, 3, nil)
	c.WaitLeader(wait)
	ctx := clustertest.Ctx(t, wait)

	upper := jobraft.NewKind[upperArgs]("upper")
	quiet := jobraft.NewKind[upperArgs]("quiet")
	line := jobraft.NewKind[string]("line").WithCodec(lineCodec{})
	refused := jobraft.NewKind[upperArgs]("refused").WithCodec(refusingCodec{})
	var calls atomic.Int32
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Ctls[1].Run(runCtx, jobraft.WorkerConfig{Queues: map[string]int{"t": 2}, PollWait: time.Second, Handlers: map[string]jobraft.Handler{
			upper.Name(): jobraft.Handle(upper, func(_ context.Context, _ jobraft.Job, a upperArgs) (upperResult, error) {
				calls.Add(1)
				return upperResult{Upper: strings.ToUpper(a.Text), Len: len(a.Text)}, nil
			}),
			quiet.Name(): quiet.Handler(func(context.Context, jobraft.Job, upperArgs) error { calls.Add(1); return nil }),
			line.Name(): jobraft.Handle(line, func(_ context.Context, _ jobraft.Job, s string) (string, error) {
				calls.Add(1)
				return strings.ToUpper(s), nil
			}),
			refused.Name(): refused.Handler(func(context.Context, jobraft.Job, upperArgs) error { calls.Add(1); return nil }),
		}})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	finish := func(id string) jobraft.Job {
		t.Helper()
		j, err := c.Ctls[2].Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	t.Run("round trip", func(t *testing.T) {
		s, err := upper.Submit(ctx, c.Ctls[0], jobraft.SubmitRequest{Queue: "t"}, upperArgs{Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		j := finish(s.ID)
		res, err := jobraft.ResultOf[upperResult](upper, j)
		if j.State != jobraft.StateSucceeded || err != nil || res != (upperResult{Upper: "HELLO", Len: 5}) {
			t.Fatalf("job %s %s: result %+v, %v", j.ID, j.State, res, err)
		}
		got, err := c.Ctls[2].Get(ctx, s.ID, jobraft.Linearizable)
		if err != nil {
			t.Fatal(err)
		}
		if args, err := upper.Args(got); err != nil || args.Text != "hello" {
			t.Fatalf("arguments read back: %+v, %v", args, err)
		}
		// SubmitBatch takes typed requests too; a kind without a result
		// acks with none; a codec of the host's own round-trips.
		r1, err := quiet.Request(jobraft.SubmitRequest{Queue: "t"}, upperArgs{Text: "x"})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := line.Request(jobraft.SubmitRequest{Queue: "t"}, "abc")
		if err != nil || string(r2.Payload) != "line:abc" {
			t.Fatalf("line request %q, %v", r2.Payload, err)
		}
		out, err := c.Ctls[2].SubmitBatch(ctx, []jobraft.SubmitRequest{r1, r2})
		if err != nil || out[0].Err != nil || out[1].Err != nil {
			t.Fatalf("batch: %v %+v", err, out)
		}
		if j := finish(out[0].Job.ID); j.State != jobraft.StateSucceeded || len(j.Result) != 0 {
			t.Fatalf("quiet job %s, result of %d bytes", j.State, len(j.Result))
		}
		j = finish(out[1].Job.ID)
		if s, err := jobraft.ResultOf[string](line, j); j.State != jobraft.StateSucceeded || err != nil || s != "ABC" {
			t.Fatalf("line job %s: %q, %v", j.State, s, err)
		}
	})

	t.Run("a payload that does not decode is termed", func(t *testing.T) {
		before := calls.Load()
		for _, payload := range []string{`{"text": "` + secret, `{"text": ["` + secret + `"]}`, secret} {
			s, err := c.Ctls[0].Submit(ctx, jobraft.SubmitRequest{Queue: "t", Kind: upper.Name(), Payload: []byte(payload)})
			if err != nil {
				t.Fatal(err)
			}
			j := finish(s.ID)
			if j.State != jobraft.StateDead || j.Attempts != 1 || !strings.Contains(j.LastError, "decode arguments") ||
				strings.Contains(j.LastError, "SECRET") || strings.Contains(j.LastError, "text") {
				t.Fatalf("payload %q: job %s after %d attempts, reason %q", payload, j.State, j.Attempts, j.LastError)
			}
			var ce *jobraft.CodecError
			if _, err := upper.Args(j); !errors.As(err, &ce) || !errors.Is(err, jobraft.ErrCodec) || ce.Len != len(payload) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("Args of a bad payload: %v", err)
			}
		}
		if n := calls.Load() - before; n != 0 {
			t.Fatalf("the typed function ran %d times on payloads that do not decode", n)
		}
	})

	t.Run("a codec that refuses", func(t *testing.T) {
		st, err := c.Ctls[0].Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = refused.Submit(ctx, c.Ctls[0], jobraft.SubmitRequest{ID: "refused-1", Queue: "t"}, upperArgs{Text: secret})
		var ce *jobraft.CodecError
		if !errors.Is(err, jobraft.ErrNotSubmitted) || !errors.Is(err, jobraft.ErrInvalidRequest) || !errors.Is(err, jobraft.ErrCodec) ||
			!errors.Is(err, errCodec) || !errors.As(err, &ce) || ce.Op != "encode arguments" || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("submit with a refusing codec: %v", err)
		}
		if _, err := c.Ctls[0].Get(ctx, "refused-1", jobraft.Linearizable); !errors.Is(err, jobraft.ErrNotFound) {
			t.Fatalf("the refused job: %v, want ErrNotFound", err)
		}
		after, err := c.Ctls[0].Stats(ctx)
		if err != nil || after.Jobs != st.Jobs {
			t.Fatalf("jobs %d before, %d after a refused submit (%v)", st.Jobs, after.Jobs, err)
		}
		// A request of another kind, or with a payload of its own, is
		// refused as well.
		for _, req := range []jobraft.SubmitRequest{{Queue: "t", Kind: "other"}, {Queue: "t", Payload: []byte(secret)}} {
			if _, err := upper.Submit(ctx, c.Ctls[0], req, upperArgs{}); !errors.Is(err, jobraft.ErrInvalidRequest) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("request %+v: %v", req, err)
			}
		}
		// Bytes the refusing codec cannot decode: termed, with its reason.
		before := calls.Load()
		s, err := c.Ctls[0].Submit(ctx, jobraft.SubmitRequest{Queue: "t", Kind: refused.Name(), Payload: []byte(`{"text":"ok"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if j := finish(s.ID); j.State != jobraft.StateDead || !strings.Contains(j.LastError, "decode arguments") || calls.Load() != before {
			t.Fatalf("job %s, reason %q, %d calls", j.State, j.LastError, calls.Load()-before)
		}
		// No result to decode: a typed error, not a zero value.
		if _, err := jobraft.ResultOf[upperResult](upper, jobraft.Job{ID: "j", Kind: "upper"}); !errors.Is(err, jobraft.ErrCodec) {
			t.Fatalf("ResultOf an empty result: %v", err)
		}
		var syn *json.SyntaxError
		if _, err := jobraft.ResultOf[upperResult](upper, jobraft.Job{ID: "j", Kind: "upper", Result: []byte("{")}); !errors.As(err, &syn) {
			t.Fatalf("ResultOf reaches the codec's error: %v", err)
		}
	})
}
