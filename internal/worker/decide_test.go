package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/fsm"
)

func TestDecide(t *testing.T) {
	boom := errors.New("boom")
	lost := fmt.Errorf("%w: job j expired at index 9", ErrLeaseLost)
	for _, tc := range []struct {
		name       string
		res        []byte
		herr, caus error
		want       Outcome
	}{
		{"success acks with the result", []byte("r"), nil, nil, Outcome{Verb: Ack, Result: []byte("r")}},
		{"an error naks with the backoff policy", nil, boom, nil, Outcome{Verb: Nak, Message: "boom"}},
		{"RetryAfter naks with its delay", nil, RetryAfter(boom, time.Minute), nil, Outcome{Verb: Nak, Delay: time.Minute, Message: "boom"}},
		{"Permanent terms", nil, Permanent(boom), nil, Outcome{Verb: Term, Message: "boom"}},
		{"Permanent wrapped terms", nil, fmt.Errorf("step 2: %w", Permanent(boom)), nil, Outcome{Verb: Term, Message: "step 2: boom"}},
		{"a lost lease drops a success", []byte("r"), nil, lost, Outcome{Verb: Drop}},
		{"a lost lease drops an error", nil, Permanent(boom), lost, Outcome{Verb: Drop}},
		{"Run's context ending is no lost lease", nil, context.Canceled, context.Canceled, Outcome{Verb: Nak, Message: "context canceled"}},
	} {
		got := Decide(tc.res, tc.herr, tc.caus)
		if got.Verb != tc.want.Verb || string(got.Result) != string(tc.want.Result) || got.Delay != tc.want.Delay || got.Message != tc.want.Message {
			t.Errorf("%s: Decide = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPlan(t *testing.T) {
	h := func(context.Context, fsm.Job) ([]byte, error) { return nil, nil }
	base := func() Config {
		return Config{Worker: "w", Queues: map[string]int{"b": 2, "a": 1}, Handlers: map[string]Handler{"y": h, "x": h},
			LeaseTTL: time.Minute, PollWait: time.Second}
	}
	claims, err := Plan(base())
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 2 || claims[0].Queue != "a" || claims[1].Queue != "b" || claims[1].Slots != 2 ||
		strings.Join(claims[0].Kinds, ",") != "x,y" || claims[0].Worker != "w" || claims[0].Wait != time.Second {
		t.Fatalf("claims %+v", claims)
	}
	withDefault := base()
	withDefault.Default = h
	if claims, err := Plan(withDefault); err != nil || claims[0].Kinds != nil {
		t.Fatalf("with Default: %+v, %v (want every kind)", claims, err)
	}
	many := base()
	many.Handlers = map[string]Handler{}
	for i := range fsm.MaxClaimKinds + 1 {
		many.Handlers[fmt.Sprint("k", i)] = h
	}
	for name, mut := range map[string]func(*Config){
		"no queues":      func(c *Config) { c.Queues = nil },
		"no handlers":    func(c *Config) { c.Handlers = nil },
		"nil handler":    func(c *Config) { c.Handlers["z"] = nil },
		"concurrency 0":  func(c *Config) { c.Queues["a"] = 0 },
		"too many kinds": func(c *Config) { c.Handlers = many.Handlers },
		"bad queue name": func(c *Config) { c.Queues[""] = 1 },
		"bad TTL":        func(c *Config) { c.LeaseTTL = fsm.MaxLeaseTTL + time.Second },
	} {
		cfg := base()
		mut(&cfg)
		if claims, err := Plan(cfg); err == nil {
			t.Errorf("%s: Plan accepted it: %+v", name, claims)
		}
	}
}
