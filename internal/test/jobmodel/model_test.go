package jobmodel

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

type op struct {
	in        Input
	out       Output
	call, ret int64
}

func check(t *testing.T, ops []op) porcupine.CheckResult {
	t.Helper()
	var h []porcupine.Operation
	for i, o := range ops {
		h = append(h, porcupine.Operation{ClientId: i, Input: o.in, Output: o.out, Call: o.call, Return: o.ret})
	}
	res, _ := Check(h, 10*time.Second)
	return res
}

const never = math.MaxInt64

func TestLegalHistories(t *testing.T) {
	cases := map[string][]op{
		"lifecycle": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Get, "a", 0, ""}, Output{OK, 5, Running, ""}, 4, 5},
			{Input{Nak, "a", 5, ""}, Output{OK, 0, "", ""}, 6, 7},
			{Input{Claim, "a", 0, ""}, Output{OK, 9, "", ""}, 8, 9},
			{Input{Ack, "a", 5, ""}, Output{Stale, 0, "", ""}, 10, 11},
			{Input{Ack, "a", 9, ""}, Output{OK, 0, "", ""}, 12, 13},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, ""}, 14, 15},
		},
		"unknown submit took effect": {
			{Input{Submit, "a", 0, ""}, Output{Unknown, 0, "", ""}, 0, never},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Absent, ""}, 1, 2},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Pending, ""}, 3, 4},
		},
		"unknown claim leased it": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{Unknown, 0, "", ""}, 2, never},
			{Input{Claim, "a", 0, ""}, Output{OK, 0, "", ""}, 3, 4},
			{Input{Get, "a", 0, ""}, Output{OK, 7, Running, ""}, 5, 6},
		},
		"repeated ack and nak succeed": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Nak, "a", 5, ""}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Nak, "a", 5, ""}, Output{OK, 0, "", ""}, 6, 7},
			{Input{Ack, "a", 5, ""}, Output{Stale, 0, "", ""}, 8, 9},
			{Input{Claim, "a", 0, ""}, Output{OK, 9, "", ""}, 10, 11},
			{Input{Nak, "a", 5, ""}, Output{OK, 0, "", ""}, 12, 13},
			{Input{Ack, "a", 9, ""}, Output{OK, 0, "", ""}, 14, 15},
			{Input{Ack, "a", 9, ""}, Output{OK, 0, "", ""}, 16, 17},
			{Input{Nak, "a", 5, ""}, Output{Stale, 0, "", ""}, 18, 19},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, ""}, 20, 21},
		},
		"unknown ack, its retry answered ok": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Ack, "a", 5, ""}, Output{Unknown, 0, "", ""}, 4, never},
			{Input{Ack, "a", 5, ""}, Output{OK, 0, "", ""}, 5, 6},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, ""}, 7, 8},
		},
		"a repeat is the same request, another result is stale": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Ack, "a", 5, "r0"}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Ack, "a", 5, "r0"}, Output{OK, 0, "", ""}, 6, 7},
			{Input{Ack, "a", 5, "r1"}, Output{Stale, 0, "", ""}, 8, 9},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, "r0"}, 10, 11},
		},
		"concurrent different acks, one wins, the other is stale": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Ack, "a", 5, "r0"}, Output{Stale, 0, "", ""}, 4, 8},
			{Input{Ack, "a", 5, "r1"}, Output{OK, 0, "", ""}, 5, 7},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, "r1"}, 9, 10},
		},
		"unknown ack won over a stale one": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Ack, "a", 5, "r0"}, Output{Unknown, 0, "", ""}, 4, never},
			{Input{Ack, "a", 5, "r1"}, Output{Stale, 0, "", ""}, 5, 6},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, "r0"}, 7, 8},
		},
		"nak repeated with its error, another error stale": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 5, "", ""}, 2, 3},
			{Input{Nak, "a", 5, "e0"}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Nak, "a", 5, "e1"}, Output{Stale, 0, "", ""}, 6, 7},
			{Input{Nak, "a", 5, "e0"}, Output{OK, 0, "", ""}, 8, 9},
		},
		"concurrent claims, one wins": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 0, "", ""}, 2, 6},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 3, 5},
		},
	}
	for name, ops := range cases {
		if res := check(t, ops); res != porcupine.Ok {
			t.Errorf("%s: %s, want ok", name, res)
		}
	}
}

// The checker must fail on each kind of violation.
func TestViolationsAreCaught(t *testing.T) {
	cases := map[string][]op{
		"acked submit lost": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Absent, ""}, 2, 3},
		},
		"not-submitted job exists": {
			{Input{Submit, "a", 0, ""}, Output{NotDone, 0, "", ""}, 0, 1},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Pending, ""}, 2, 3},
		},
		"double claim": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Claim, "a", 0, ""}, Output{OK, 6, "", ""}, 4, 5},
		},
		"token not increasing": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 8, "", ""}, 2, 3},
			{Input{Nak, "a", 8, ""}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Claim, "a", 0, ""}, Output{OK, 7, "", ""}, 6, 7},
		},
		"stale ack accepted": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Ack, "a", 3, ""}, Output{OK, 0, "", ""}, 4, 5},
		},
		"done job undone": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Ack, "a", 4, ""}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Pending, ""}, 6, 7},
		},
		"stale read": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Pending, ""}, 4, 5},
		},
		"repeated ack refused as stale": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Ack, "a", 4, ""}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Ack, "a", 4, ""}, Output{Stale, 0, "", ""}, 6, 7},
		},
		"ack repeating a nak accepted": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Nak, "a", 4, ""}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Ack, "a", 4, ""}, Output{OK, 0, "", ""}, 6, 7},
		},
		"nak of an older ended lease accepted": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Nak, "a", 4, ""}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Claim, "a", 0, ""}, Output{OK, 6, "", ""}, 6, 7},
			{Input{Nak, "a", 6, ""}, Output{OK, 0, "", ""}, 8, 9},
			{Input{Nak, "a", 4, ""}, Output{OK, 0, "", ""}, 10, 11},
		},
		"different acks of one lease both accepted": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Ack, "a", 4, "r0"}, Output{OK, 0, "", ""}, 4, 6},
			{Input{Ack, "a", 4, "r1"}, Output{OK, 0, "", ""}, 5, 7},
		},
		"different naks of one lease both accepted": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Nak, "a", 4, "e0"}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Nak, "a", 4, "e1"}, Output{OK, 0, "", ""}, 6, 7},
		},
		"the job holds the losing ack's result": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 4, "", ""}, 2, 3},
			{Input{Ack, "a", 4, "r0"}, Output{OK, 0, "", ""}, 4, 5},
			{Input{Ack, "a", 4, "r1"}, Output{Stale, 0, "", ""}, 6, 7},
			{Input{Get, "a", 0, ""}, Output{OK, 0, Succeeded, "r1"}, 8, 9},
		},
		"empty claim while ready": {
			{Input{Submit, "a", 0, ""}, Output{OK, 0, "", ""}, 0, 1},
			{Input{Claim, "a", 0, ""}, Output{OK, 0, "", ""}, 2, 3},
		},
	}
	for name, ops := range cases {
		if res := check(t, ops); res != porcupine.Illegal {
			t.Errorf("%s: %s, want illegal", name, res)
		}
	}
}
