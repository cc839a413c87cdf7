package main

// The series, in table order. Each is one operation measured in closed
// loops on one system; a series not run reports zero and its ratios "-".
const (
	bareSubmit = iota
	bareCycle
	natsSubmit
	natsCycle
	jobraftSubmit     // Submit without an ID (the controller assigns one)
	jobraftSeqSubmit  // Submit with a per-client sequence ID
	jobraftUUIDSubmit // Submit with a random UUIDv4 ID
	jobraftCycle      // submit, claim, ack by the same client
	jobraftRunCycle   // submit and Wait; Run with C slots claims and acks
	jobraftClaimCycle // submit and Wait; C worker goroutines Claim(Max=1) and Ack
	jobraft5Submit    // Submit without an ID, five members
	jobraft5Cycle     // the self-served cycle, five members
	nSeries
)

// series describes one series: its name in tables and progress lines, its
// name in profile file names and -series, and the system it runs on.
type series struct {
	Name, File, System string
}

var allSeries = [nSeries]series{
	bareSubmit:        {"bare raft submit", "bare-submit", "bare"},
	bareCycle:         {"bare raft cycle (3 entries)", "bare-cycle", "bare"},
	natsSubmit:        {"NATS JS R3 submit", "nats-submit", "nats"},
	natsCycle:         {"NATS JS R3 cycle", "nats-cycle", "nats"},
	jobraftSubmit:     {"jobraft Submit", "jobraft-submit", "jobraft"},
	jobraftSeqSubmit:  {"jobraft Submit, per-client sequence IDs", "jobraft-submit-seq", "jobraft"},
	jobraftUUIDSubmit: {"jobraft Submit, UUIDv4 IDs", "jobraft-submit-uuid", "jobraft"},
	jobraftCycle:      {"jobraft cycle (self-served)", "jobraft-cycle", "jobraft"},
	jobraftRunCycle:   {"jobraft cycle, separate workers (Run, C slots)", "jobraft-cycle-run", "jobraft"},
	jobraftClaimCycle: {"jobraft cycle, separate workers (C × Claim+Ack)", "jobraft-cycle-claim", "jobraft"},
	jobraft5Submit:    {"jobraft Submit, 5 members", "jobraft5-submit", "jobraft5"},
	jobraft5Cycle:     {"jobraft cycle (self-served), 5 members", "jobraft5-cycle", "jobraft5"},
}

// systems are the names -systems takes, in the order they run.
var systems = []string{"bare", "nats", "jobraft", "jobraft5"}

// A goal of issue #32's, checked at every client count: the ratio of
// series Num's rate to Den's at least Min, or (Den < 0) Num's p99 at most
// MaxP99.
type goal struct {
	Name     string
	Num, Den int
	Min      float64
	MaxP99   float64 // milliseconds
}

var goals = []goal{
	{Name: "ID'd Submit (sequence) / Submit", Num: jobraftSeqSubmit, Den: jobraftSubmit, Min: 0.95},
	{Name: "ID'd Submit (UUIDv4) / Submit", Num: jobraftUUIDSubmit, Den: jobraftSubmit, Min: 0.95},
	{Name: "Submit / NATS submit", Num: jobraftSubmit, Den: natsSubmit, Min: 3.5},
	{Name: "ID'd Submit (sequence) / NATS submit", Num: jobraftSeqSubmit, Den: natsSubmit, Min: 3.5},
	{Name: "ID'd Submit (UUIDv4) / NATS submit", Num: jobraftUUIDSubmit, Den: natsSubmit, Min: 3.5},
	{Name: "cycle, workers (Run) / self-served cycle", Num: jobraftRunCycle, Den: jobraftCycle, Min: 0.9},
	{Name: "cycle, workers (Claim) / self-served cycle", Num: jobraftClaimCycle, Den: jobraftCycle, Min: 0.9},
	{Name: "cycle, workers (Run) / bare submit", Num: jobraftRunCycle, Den: bareSubmit, Min: 3},
	{Name: "cycle, workers (Claim) / bare submit", Num: jobraftClaimCycle, Den: bareSubmit, Min: 3},
	{Name: "Submit, 5 members / 3 members", Num: jobraft5Submit, Den: jobraftSubmit, Min: 0.7},
	{Name: "cycle, 5 members / 3 members", Num: jobraft5Cycle, Den: jobraftCycle, Min: 0.7},
	{Name: "Submit p99", Num: jobraftSubmit, Den: -1, MaxP99: 5},
	{Name: "ID'd Submit (sequence) p99", Num: jobraftSeqSubmit, Den: -1, MaxP99: 5},
	{Name: "ID'd Submit (UUIDv4) p99", Num: jobraftUUIDSubmit, Den: -1, MaxP99: 5},
	{Name: "self-served cycle p99", Num: jobraftCycle, Den: -1, MaxP99: 15},
	{Name: "cycle, workers (Run) p99", Num: jobraftRunCycle, Den: -1, MaxP99: 15},
	{Name: "cycle, workers (Claim) p99", Num: jobraftClaimCycle, Den: -1, MaxP99: 15},
}

// Ratios printed beside the goals (jobraft against the baselines).
var ratios = [][2]int{
	{jobraftSubmit, bareSubmit},
	{jobraftCycle, natsCycle},
	{jobraftCycle, bareCycle},
	{jobraftCycle, bareSubmit},
}
