package jobmodel

import "fmt"

// NextInput picks a client's next operation on one of jobs model jobs
// (job k is named prefix-k): a submit (2 in 10), a claim (2 in 10), an ack
// or nak (3 in 10, when a token of the job is known: the latest, or one in
// four times any earlier one, maybe stale; its result or error one of two,
// so a repeat under a token is the same request about half the time), else
// a get. intn is the caller's seeded random source; tokens holds the
// tokens claims returned, per job. It returns the input and k.
func NextInput(intn func(int) int, jobs int, prefix string, tokens map[string][]uint64) (Input, int) {
	k := intn(jobs)
	in := Input{Job: fmt.Sprintf("%s-%d", prefix, k)}
	switch r := intn(10); {
	case r < 2:
		in.Kind = Submit
	case r < 4:
		in.Kind = Claim
	case r < 7 && len(tokens[in.Job]) > 0:
		in.Kind = Ack
		in.Result = fmt.Sprintf("r%d", intn(2))
		if r < 6 {
			in.Kind = Nak
			in.Result = fmt.Sprintf("e%d", intn(2))
		}
		ts := tokens[in.Job]
		in.Token = ts[len(ts)-1]
		if intn(4) == 0 {
			in.Token = ts[intn(len(ts))] // maybe stale
		}
	default:
		in.Kind = Get
	}
	return in, k
}

// GetState maps a job state a get reported to the model's: the workloads
// nak with a 1 ns delay, so a scheduled job is due at once (promoted lazily
// by the next claim) and the model calls it pending.
func GetState(state string) string {
	if state == "scheduled" {
		return Pending
	}
	return state
}
