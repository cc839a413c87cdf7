package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRefusals walks every refusal path: each must be typed and change
// nothing.
func TestRefusals(t *testing.T) {
	h := newHarness(t)
	h.submit(NewJob{ID: "run", Queue: "q", Kind: "k"})
	run := h.claim1("q", time.Minute)
	tok := run.Lease.Token
	big := strings.Repeat("x", MaxMessage+1)
	cases := []struct {
		c    Command
		want error
	}{
		{SubmitCmd{}, ErrInvalidCommand},
		{ClaimCmd{Worker: "w", Max: 1, TTL: time.Second}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{""}, Worker: "w", Max: 1, TTL: time.Second}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{strings.Repeat("q", MaxNameLen+1)}, Worker: "w", Max: 1, TTL: time.Second}, ErrTooLarge},
		{ClaimCmd{Queues: make([]string, MaxClaimQueue+1), Worker: "w", Max: 1, TTL: time.Second}, ErrTooLarge},
		{ClaimCmd{Queues: []string{"q"}, Max: 1, TTL: time.Second}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 0, TTL: time.Second}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: MaxClaim + 1, TTL: time.Second}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: MaxLeaseTTL + 1}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Second, Kinds: []string{"k", ""}}, ErrInvalidCommand},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Second, Kinds: []string{strings.Repeat("k", MaxNameLen+1)}}, ErrTooLarge},
		{ClaimCmd{Queues: []string{"q"}, Worker: "w", Max: 1, TTL: time.Second, Kinds: make([]string, MaxClaimKinds+1)}, ErrTooLarge},
		{ExtendCmd{ID: "run", Token: tok, TTL: -1}, ErrInvalidCommand},
		{ExtendCmd{ID: "", Token: tok}, ErrInvalidCommand},
		{ExtendCmd{ID: "missing", Token: tok}, ErrNotFound},
		{AckCmd{ID: "run", Token: tok, Result: make([]byte, MaxResult+1)}, ErrTooLarge},
		{AckCmd{ID: strings.Repeat("i", MaxIDLen+1), Token: tok}, ErrTooLarge},
		{AckCmd{ID: "missing", Token: tok}, ErrNotFound},
		{AckCmd{ID: "run", Token: tok + 1}, ErrStaleLease},
		{NakCmd{ID: "run", Token: tok, Delay: -1}, ErrInvalidCommand},
		{NakCmd{ID: "run", Token: tok, Delay: MaxDelay + 1}, ErrInvalidCommand},
		{NakCmd{ID: "run", Token: tok, Error: big}, ErrTooLarge},
		{NakCmd{ID: "missing", Token: tok}, ErrNotFound},
		{TermCmd{ID: "run", Token: tok, Reason: big}, ErrTooLarge},
		{TermCmd{ID: "missing", Token: tok}, ErrNotFound},
		{CancelCmd{ID: "run", Reason: big}, ErrTooLarge},
		{CancelCmd{ID: "missing"}, ErrNotFound},
		{RetryCmd{ID: "missing"}, ErrNotFound},
		{RetryCmd{ID: "run"}, ErrInvalidState},
		{RetryCmd{}, ErrInvalidCommand},
		{ExpireCmd{}, ErrInvalidCommand},
		{PauseCmd{}, ErrInvalidCommand},
		{ResumeCmd{Queue: strings.Repeat("q", MaxNameLen+1)}, ErrTooLarge},
		{SweepCmd{MaxAge: -1}, ErrInvalidCommand},
	}
	for _, tc := range cases {
		h.refused(tc.c, tc.want)
		if _, err := EncodeCommand(tc.c); tc.want != ErrNotFound && tc.want != ErrStaleLease &&
			tc.want != ErrInvalidState && !errors.Is(err, tc.want) {
			t.Errorf("EncodeCommand(%s) = %v, want %v", tc.c.Type(), err, tc.want)
		}
	}
	// Submit: each bad job is rejected alone; the good one is created.
	r := h.ok(SubmitCmd{Jobs: []NewJob{
		{Queue: "", Kind: "k"},
		{Queue: "q", Kind: ""},
		{Queue: "q", Kind: "k", Payload: make([]byte, MaxPayload+1)},
		{Queue: "q", Kind: "k", IdempotencyKey: strings.Repeat("k", MaxKeyLen+1)},
		{ID: "@mine", Queue: "q", Kind: "k"},
		{Queue: "q", Kind: "k", MaxAttempts: MaxAttempts + 1},
		{Queue: "q", Kind: "k", Backoff: Backoff{Base: -1}},
		{Queue: "q", Kind: "k", Backoff: Backoff{Base: 2, Max: 1}},
		{Queue: "q", Kind: "k", Backoff: Backoff{Factor: 999}},
		{Queue: "q", Kind: "k", Backoff: Backoff{Jitter: 101}},
		{ID: "ok", Queue: "q", Kind: "k"},
	}})
	wantCodes := []Code{CodeInvalidCommand, CodeInvalidCommand, CodeTooLarge, CodeTooLarge, CodeInvalidCommand,
		CodeInvalidCommand, CodeInvalidCommand, CodeInvalidCommand, CodeInvalidCommand, CodeInvalidCommand, CodeOK}
	for i, s := range r.Submitted {
		if s.Code != wantCodes[i] || (s.Code == CodeOK) != (s.Outcome == OutcomeCreated) {
			t.Errorf("job %d: %s %v", i, s.Outcome, s.Err())
		}
	}
	// Undecodable entries.
	for _, raw := range [][]byte{nil, {1}, {2, 1}, {1, 99}, {1, byte(CmdRetry)}, {1, byte(CmdRetry), 5, 'a'},
		append(appendCommand(nil, &RetryCmd{ID: "run"}), 0)} {
		before := h.m.stateSum()
		h.index++
		res, err := DecodeResult(h.m.Apply(Entry{Index: h.index, Term: 1, Time: h.now, Cmd: raw}))
		if err != nil || res.Code == CodeOK || h.m.stateSum() != before {
			t.Errorf("raw %x: %v %v", raw, res.Err(), err)
		}
	}
	// A replayed index is refused and does not move the applied index.
	res, _ := DecodeResult(h.m.Apply(Entry{Index: h.index, Term: 1, Time: h.now, Cmd: appendCommand(nil, &PauseCmd{Queue: "z"})}))
	if !errors.Is(res.Err(), ErrIndexNotIncreasing) || h.m.AppliedIndex() != h.index {
		t.Errorf("replay: %v", res.Err())
	}
}
