package chaos

import (
	"bufio"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is a fault family. The set is open: a new kind needs a line here,
// its text form (format/parse), its effect (runner.go) and, when the
// generator should pick it, a weight (generate.go).
type Kind string

// Fault kinds. Every kind but Transfer holds for the action's span
// (At, At+For) and is undone at its end.
const (
	// Kill SIGKILLs a member's process and restarts it from its data dir
	// at the end of the span.
	Kill Kind = "kill"
	// Pause SIGSTOPs a member's process; SIGCONT at the end.
	Pause Kind = "pause"
	// Partition cuts every link between Members and the rest, both ways.
	Partition Kind = "partition"
	// Bridge cuts the link between two members both ways while both still
	// reach the others (an asymmetric, non-transitive partition).
	Bridge Kind = "bridge"
	// OneWay cuts the link from Members[0] to Members[1] only.
	OneWay Kind = "oneway"
	// Mute cuts every link from one member to the others, one way: it
	// still hears them (a half-broken NIC or route). A muted leader is
	// deposed while connected: the new leader's first appends reach it at
	// once, and it still holds the entries it wrote and could not send.
	Mute Kind = "mute"
	// Flap takes the link between two members up and down every Period.
	Flap Kind = "flap"
	// Net drops, duplicates and delays messages on every link.
	Net Kind = "net"
	// Fsync makes a member's log fsyncs fail (EIO).
	Fsync Kind = "fsync"
	// DiskFull makes a member's log writes fail (ENOSPC).
	DiskFull Kind = "diskfull"
	// BitFlip kills a member, flips one bit in one of its log segments
	// (Target "log") or snapshot files ("snap"), and restarts it at the
	// end of the span. The member may refuse to start (a typed corruption
	// error): it then stays down, a minority.
	BitFlip Kind = "bitflip"
	// Skew restarts a member with its clock Skew off; at the end of the
	// span it restarts it with a true clock.
	Skew Kind = "skew"
	// Stall makes a member's next log fsync after the action starts take
	// Delay longer, once (a disk that stalls). With a deposed leader
	// (Mute) it aims at the commit clamp: a new leader whose no-op is
	// stalled keeps reading its old last index while its appends to the
	// deposed leader, whose answers are lost, back off longer and longer;
	// the append sent after the back-off that spans the stall carries that
	// old index as verified and a commit index already past it.
	Stall Kind = "stall"
	// Lie makes a member's log a lying disk for the span: from its start
	// the log's fsyncs succeed while its data sits in a volatile cache
	// (clustertest's POST /lie copies the log's segments then, with no write
	// interleaving); at its end the member is SIGKILLed, everything its
	// log wrote since the start is lost (the copy is put back: a
	// crash-consistent earlier state, commit floor marks included) and it
	// restarts. Its stable store (term, vote) and snapshots keep their
	// durability. It breaks Raft's stable-storage assumption: what the
	// checkers excuse and what they still require is in docs/chaos.md,
	// "A lying disk".
	Lie Kind = "lie"
	// PowerLoss is the ordinary crash of a machine whose disk keeps its
	// promises: power goes, everything the member's log had not yet
	// fsynced is lost, everything it fsynced stays (clustertest's POST
	// /powerloss: faultfs.FS.PowerLoss, then the process SIGKILLs itself
	// at once, so it sends nothing on the strength of what it lost). The
	// member restarts from its data dir at the end of the span, like
	// Kill. Unlike Lie it breaks no Raft assumption: every checker stays
	// strict (docs/chaos.md, "Power loss").
	PowerLoss Kind = "powerloss"
	// Transfer asks the leader to hand leadership over (instant).
	Transfer Kind = "transfer"
	// Add adds a spare (a member process started empty, not in the
	// configuration): it joins as a non-voter and the leader's catch-up
	// policy promotes it (raft.Node.AddMember). Instant: the change runs
	// in the background, retried until it completes.
	Add Kind = "add"
	// Remove removes a member from the configuration (the leader
	// included: it steps down), then stops its process for good.
	// Instant, like Add.
	Remove Kind = "remove"
	// Replace removes Members[0] and adds the spare Members[1] in its
	// place: a fresh member, an empty data dir, a new ID. Instant.
	Replace Kind = "replace"
)

// instant reports whether the kind has no span (it happens at At).
func (k Kind) instant() bool { return k == Transfer || k == Add || k == Remove || k == Replace }

// Leader, in Action.Members, names the member leading when the action
// starts (resolved then from the latest status round; text "leader").
// An action whose leader cannot be resolved, or whose member is already
// down or paused, is skipped and the run notes it.
const Leader = -1

// Isolated, in Action.Members, names the member the most recently started
// partition still in force cut off alone (text "isolated"): "kill the
// deposed leader while it is cut off" is a partition of Leader, then a
// kill of Isolated.
const Isolated = -2

// Follower, in Action.Members, names the lowest-numbered running voter
// that is not the leader when the action starts (text "follower");
// Follower2 the next one (text "follower2").
const (
	Follower  = -3
	Follower2 = -4
)

// Action is one timed fault of a schedule.
type Action struct {
	At, For time.Duration // start, relative to the run's start; span
	Kind    Kind
	Members []int // the members it targets (Partition: one side); Leader: the leader
	Period  time.Duration
	Drop    float64
	Dup     float64
	Delay   time.Duration
	Skew    time.Duration
	Target  string // BitFlip: "log" or "snap"
}

// End is when the action's fault is undone.
func (a Action) End() time.Duration { return a.At + a.For }

// has reports whether member m is one of the action's Members.
func (a Action) has(m int) bool { return slices.Contains(a.Members, m) }

// Schedule is a seeded fault schedule: data, printed and parsed by
// String/Parse, replayed exactly (the faults; the workload and the
// machine's timing are not replayed).
type Schedule struct {
	Seed    uint64
	Members int
	// Spare members: processes m<Members>..m<Members+Spare-1> that run
	// from the start, empty and outside the configuration, until an Add
	// or Replace adds them.
	Spare int
	// Span is the fault phase: every action ends by it; the final phase
	// (healed network, every member running) follows.
	Span    time.Duration
	Actions []Action
}

// Slots is the number of member processes: the members and the spares.
func (s Schedule) Slots() int { return s.Members + s.Spare }

// Validate reports a schedule the runner cannot execute.
func (s Schedule) Validate() error {
	if s.Members < 1 || s.Members > 9 || s.Spare < 0 || s.Slots() > 9 {
		return fmt.Errorf("%w: %d members, %d spare", ErrSchedule, s.Members, s.Spare)
	}
	added := map[int]bool{}
	for i, a := range s.Actions {
		if a.Kind.instant() && a.For != 0 {
			return fmt.Errorf("%w: action %d (%s) is instant", ErrSchedule, i, a.Kind)
		}
		if a.At < 0 || a.For < 0 || a.End() > s.Span {
			return fmt.Errorf("%w: action %d (%s) outside [0, %s]", ErrSchedule, i, a.Kind, s.Span)
		}
		for _, m := range a.Members {
			if (m < 0 && m != Leader && m != Isolated && m != Follower && m != Follower2) || m >= s.Slots() {
				return fmt.Errorf("%w: action %d (%s) names member %d", ErrSchedule, i, a.Kind, m)
			}
		}
		want := map[Kind]int{Kill: 1, Pause: 1, Bridge: 2, OneWay: 2, Mute: 1, Flap: 2, Fsync: 1, DiskFull: 1, BitFlip: 1, Skew: 1, Transfer: 0, Net: 0, Stall: 1, Lie: 1, PowerLoss: 1, Add: 1, Remove: 1, Replace: 2}
		if n, ok := want[a.Kind]; ok && len(a.Members) != n {
			return fmt.Errorf("%w: action %d (%s) takes %d members, has %d", ErrSchedule, i, a.Kind, n, len(a.Members))
		}
		if a.Kind == Partition && (len(a.Members) == 0 || len(a.Members) >= s.Slots()) {
			return fmt.Errorf("%w: action %d: a partition side of %d members", ErrSchedule, i, len(a.Members))
		}
		if a.Kind == Flap && a.Period <= 0 {
			return fmt.Errorf("%w: action %d: flap period %s", ErrSchedule, i, a.Period)
		}
		if a.Kind == Add || a.Kind == Replace {
			sp := a.Members[len(a.Members)-1]
			if sp < s.Members || added[sp] {
				return fmt.Errorf("%w: action %d (%s) must add a spare not added before", ErrSchedule, i, a.Kind)
			}
			added[sp] = true
		}
	}
	return nil
}

// String is the schedule's text form (Parse reads it back).
func (s Schedule) String() string {
	var b strings.Builder
	spare := ""
	if s.Spare > 0 {
		spare = fmt.Sprintf(" spare=%d", s.Spare)
	}
	fmt.Fprintf(&b, "chaos v1 seed=%d members=%d%s span=%s\n", s.Seed, s.Members, spare, s.Span)
	for _, a := range s.Actions {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// String is the action's line in a schedule.
func (a Action) String() string {
	w := []string{"at", a.At.String()}
	if !a.Kind.instant() {
		w = append(w, "for", a.For.String())
	}
	w = append(w, string(a.Kind))
	ms := func(ids []int) {
		for _, m := range ids {
			if m == Leader {
				w = append(w, "leader")
				continue
			}
			if m == Isolated {
				w = append(w, "isolated")
				continue
			}
			if m == Follower || m == Follower2 {
				w = append(w, map[int]string{Follower: "follower", Follower2: "follower2"}[m])
				continue
			}
			w = append(w, fmt.Sprintf("m%d", m))
		}
	}
	switch a.Kind {
	case Partition:
		ms(a.Members)
		w = append(w, "|", "rest")
	case Flap:
		ms(a.Members)
		w = append(w, "period="+a.Period.String())
	case Net:
		w = append(w, "drop="+strconv.FormatFloat(a.Drop, 'g', -1, 64), "dup="+strconv.FormatFloat(a.Dup, 'g', -1, 64), "delay="+a.Delay.String())
	case BitFlip:
		ms(a.Members)
		w = append(w, a.Target)
	case Skew:
		ms(a.Members)
		w = append(w, "by="+a.Skew.String())
	case Stall:
		ms(a.Members)
		w = append(w, "delay="+a.Delay.String())
	default:
		ms(a.Members)
	}
	return strings.Join(w, " ")
}

// Parse reads a schedule's text form: a header line, then one action per
// line; blank lines and lines starting with '#' are skipped.
func Parse(text string) (Schedule, error) {
	var s Schedule
	sc := bufio.NewScanner(strings.NewReader(text))
	header := false
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !header {
			if err := parseHeader(l, &s); err != nil {
				return Schedule{}, fmt.Errorf("%w: line %d: header: %v", ErrSchedule, line, err)
			}
			header = true
			continue
		}
		a, err := parseAction(strings.Fields(l))
		if err != nil {
			return Schedule{}, fmt.Errorf("%w: line %d: %v", ErrSchedule, line, err)
		}
		s.Actions = append(s.Actions, a)
	}
	if !header {
		return Schedule{}, fmt.Errorf("%w: no header", ErrSchedule)
	}
	sortActions(s.Actions)
	return s, s.Validate()
}

// parseHeader reads "chaos v1 seed=N members=N [spare=N] span=D".
func parseHeader(l string, s *Schedule) error {
	w := strings.Fields(l)
	if len(w) < 5 || w[0] != "chaos" || w[1] != "v1" {
		return fmt.Errorf("want 'chaos v1 seed=N members=N [spare=N] span=D'")
	}
	seen := map[string]bool{}
	for _, f := range w[2:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || seen[k] {
			return fmt.Errorf("word %q", f)
		}
		seen[k] = true
		var err error
		switch k {
		case "seed":
			s.Seed, err = strconv.ParseUint(v, 10, 64)
		case "members":
			s.Members, err = strconv.Atoi(v)
		case "spare":
			s.Spare, err = strconv.Atoi(v)
		case "span":
			s.Span, err = time.ParseDuration(v)
		default:
			return fmt.Errorf("unknown word %q", f)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", f, err)
		}
	}
	if !seen["seed"] || !seen["members"] || !seen["span"] {
		return fmt.Errorf("want seed, members and span")
	}
	return nil
}

func parseAction(w []string) (Action, error) {
	var a Action
	var err error
	if len(w) < 3 || w[0] != "at" {
		return a, fmt.Errorf("want 'at <duration> [for <duration>] <kind> ...'")
	}
	if a.At, err = time.ParseDuration(w[1]); err != nil {
		return a, err
	}
	w = w[2:]
	if len(w) >= 2 && w[0] == "for" {
		if a.For, err = time.ParseDuration(w[1]); err != nil {
			return a, err
		}
		w = w[2:]
	}
	if len(w) == 0 {
		return a, fmt.Errorf("no kind")
	}
	a.Kind = Kind(w[0])
	for _, f := range w[1:] {
		k, v, kv := strings.Cut(f, "=")
		switch {
		case strings.HasPrefix(f, "m") && !kv:
			m, err := strconv.Atoi(f[1:])
			if err != nil {
				return a, fmt.Errorf("member %q", f)
			}
			a.Members = append(a.Members, m)
		case f == "leader":
			a.Members = append(a.Members, Leader)
		case f == "isolated":
			a.Members = append(a.Members, Isolated)
		case f == "follower":
			a.Members = append(a.Members, Follower)
		case f == "follower2":
			a.Members = append(a.Members, Follower2)
		case f == "|" || f == "rest":
		case f == "log" || f == "snap":
			a.Target = f
		case kv && k == "period":
			a.Period, err = time.ParseDuration(v)
		case kv && k == "delay":
			a.Delay, err = time.ParseDuration(v)
		case kv && k == "by":
			a.Skew, err = time.ParseDuration(v)
		case kv && k == "drop":
			a.Drop, err = strconv.ParseFloat(v, 64)
		case kv && k == "dup":
			a.Dup, err = strconv.ParseFloat(v, 64)
		default:
			return a, fmt.Errorf("unknown word %q", f)
		}
		if err != nil {
			return a, fmt.Errorf("%s: %v", f, err)
		}
	}
	switch a.Kind {
	case Kill, Pause, Partition, Bridge, OneWay, Mute, Flap, Net, Fsync, DiskFull, BitFlip, Skew, Stall, Lie, PowerLoss, Transfer, Add, Remove, Replace:
	default:
		return a, fmt.Errorf("unknown kind %q", a.Kind)
	}
	if a.Kind == BitFlip && a.Target == "" {
		a.Target = "log"
	}
	return a, nil
}

func sortActions(as []Action) {
	sort.SliceStable(as, func(i, j int) bool { return as[i].At < as[j].At })
}
