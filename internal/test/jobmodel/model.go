// Package jobmodel is a porcupine model of the job controller as its
// clients see it, for linearizability checks of recorded histories
// (submit, claim, ack, nak, get) that include operations whose outcome is
// unknown.
//
// Each job lives in a queue of its own, so every operation touches exactly
// one job and histories partition by job (porcupine checks the partitions
// independently). Leases are assumed not to expire during the recorded
// history (tests use long TTLs): a claimed job stays running until an ack
// or nak with its token.
//
// The model, per job:
//
//	absent --submit--> pending --claim(t)--> running(t) --ack(t)--> succeeded
//	                      ^                      |
//	                      +-------nak(t)---------+
//
// with tokens strictly increasing per job (claim t requires t > every
// earlier token), a job acked done stays done, and every operation whose
// outcome is unknown either took effect at some point after its call or
// never did.
//
// Ack and nak are idempotent per request: repeating the very ack or nak
// that ended the job's most recent ended lease (same kind, token and
// Result: an ack's result, a nak's error) answers OK and changes nothing
// (it is not stale); any other ack or nak whose token is not the running
// lease's is stale, another result or error under the ended token
// included. A get of a succeeded job reports the result of the ack that
// ended its lease.
package jobmodel

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation.
type Kind uint8

// Operations.
const (
	Submit Kind = iota + 1
	Claim
	Ack
	Nak
	Get
)

func (k Kind) String() string {
	return [...]string{"?", "submit", "claim", "ack", "nak", "get"}[k]
}

// Outcome is what the client learned.
type Outcome uint8

// Outcomes.
const (
	OK      Outcome = iota + 1 // it happened (for claim: Token says what was claimed, 0 for nothing)
	NotDone                    // it did not happen and never will
	Unknown                    // it may or may not have happened (never returned, or said so)
	Stale                      // ack/nak refused: the token was not the job's current lease
)

func (o Outcome) String() string {
	return [...]string{"?", "ok", "not-done", "unknown", "stale"}[o]
}

// Job states as Get reports them.
const (
	Absent    = "absent"
	Pending   = "pending"
	Running   = "running"
	Succeeded = "succeeded"
)

// Input is an operation's request.
type Input struct {
	Kind   Kind
	Job    string
	Token  uint64 // ack, nak: the lease token used
	Result string // ack: its result; nak: its error (the rest of a nak is fixed)
}

// Output is an operation's answer.
type Output struct {
	Outcome Outcome
	Token   uint64 // claim OK: the token claimed (0: nothing claimed); get: a running job's token
	State   string // get OK: Absent, Pending, Running or Succeeded
	Result  string // get OK of a succeeded job: its result
}

// state is one job's model state. Token 0 while running means the lease
// came from a claim whose answer was lost (its token is not known yet).
// EndToken is the token of the last lease that ended (0: none), EndAck
// whether an ack (else a nak) ended it, EndResult that request's Result.
type state struct {
	St        string
	Token     uint64
	MaxToken  uint64
	EndToken  uint64
	EndAck    bool
	EndResult string
}

func step(s state, in Input, out Output) []state {
	switch in.Kind {
	case Submit:
		next := s
		if s.St == Absent {
			next.St = Pending
		}
		switch out.Outcome {
		case OK:
			return []state{next}
		case NotDone:
			return []state{s}
		default:
			return uniq(s, next)
		}
	case Claim:
		switch out.Outcome {
		case OK:
			if out.Token == 0 {
				if s.St == Pending {
					return nil // a ready job was there, the claim found nothing
				}
				return []state{s}
			}
			if s.St != Pending || out.Token <= s.MaxToken {
				return nil
			}
			return []state{{St: Running, Token: out.Token, MaxToken: out.Token, EndToken: s.EndToken, EndAck: s.EndAck, EndResult: s.EndResult}}
		case NotDone:
			return []state{s}
		default:
			if s.St != Pending {
				return []state{s}
			}
			return []state{s, {St: Running, Token: 0, MaxToken: s.MaxToken, EndToken: s.EndToken, EndAck: s.EndAck, EndResult: s.EndResult}}
		}
	case Ack, Nak:
		holds := s.St == Running && s.Token == in.Token
		repeat := in.Token != 0 && s.EndToken == in.Token && s.EndAck == (in.Kind == Ack) && s.EndResult == in.Result
		next := s
		if holds {
			next.EndToken, next.EndAck, next.EndResult = in.Token, in.Kind == Ack, in.Result
			if in.Kind == Ack {
				next.St = Succeeded
			} else {
				next.St = Pending
			}
		}
		switch out.Outcome {
		case OK:
			if !holds && !repeat {
				return nil
			}
			return []state{next}
		case Stale:
			if holds || repeat {
				return nil
			}
			return []state{s}
		case NotDone:
			return []state{s}
		default:
			return uniq(s, next)
		}
	case Get:
		if out.Outcome != OK {
			return []state{s}
		}
		if out.State != s.St || (s.St == Succeeded && out.Result != s.EndResult) {
			return nil
		}
		if s.St == Running {
			switch {
			case s.Token == out.Token:
			case s.Token == 0 && out.Token > s.MaxToken:
				s.Token, s.MaxToken = out.Token, out.Token // the lost claim's token, now known
			default:
				return nil
			}
		}
		return []state{s}
	}
	return nil
}

func uniq(a, b state) []state {
	if a == b {
		return []state{a}
	}
	return []state{a, b}
}

// Model is the porcupine model; histories are partitioned by job.
var Model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		idx := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range history {
			job := op.Input.(Input).Job
			i, ok := idx[job]
			if !ok {
				i = len(out)
				idx[job] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{state{St: Absent}} },
	Step: func(st, in, out interface{}) []interface{} {
		next := step(st.(state), in.(Input), out.(Output))
		res := make([]interface{}, len(next))
		for i := range next {
			res[i] = next[i]
		}
		return res
	},
	Equal: func(a, b interface{}) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(Input), out.(Output)
		s := fmt.Sprintf("%s(%s", i.Kind, i.Job)
		if i.Token != 0 {
			s += fmt.Sprintf(", t%d", i.Token)
		}
		if i.Result != "" {
			s += fmt.Sprintf(", %q", i.Result)
		}
		s += ") -> " + o.Outcome.String()
		if o.State != "" {
			s += " " + o.State
		}
		if o.Result != "" {
			s += fmt.Sprintf(" %q", o.Result)
		}
		if o.Token != 0 {
			s += fmt.Sprintf(" t%d", o.Token)
		}
		return s
	},
	DescribeState: func(st interface{}) string {
		s := st.(state)
		return fmt.Sprintf("%s t%d max%d end t%d ack=%v %q", s.St, s.Token, s.MaxToken, s.EndToken, s.EndAck, s.EndResult)
	},
}
