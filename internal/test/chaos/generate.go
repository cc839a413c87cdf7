package chaos

import (
	"math/rand/v2"
	"time"
)

// GenOptions shape the generated schedules.
type GenOptions struct {
	// Members of the cluster; 0: 5 for every fifth seed, else 3.
	Members int
	// Span of the fault phase (default 2s).
	Span time.Duration
	// MaxActions per schedule (default 6; at least 2 are generated).
	MaxActions int
}

// weights of the generated kinds: crashes, pauses and deposed leaders
// (Mute) most, the rest once or twice each.
var weights = []struct {
	kind Kind
	w    int
}{
	{Kill, 4}, {Pause, 2}, {Partition, 2}, {Mute, 4}, {Bridge, 1}, {OneWay, 1}, {Flap, 1}, {Net, 1},
	{Fsync, 1}, {DiskFull, 1}, {BitFlip, 1}, {Skew, 1}, {Transfer, 2},
	{Add, 1}, {Remove, 1}, {Replace, 1},
}

// maxSpare bounds the spares a generated schedule adds.
const maxSpare = 2

// step is the generator's time grain.
const step = 50 * time.Millisecond

// Generate returns the schedule of seed: the same seed and options give
// the same schedule. Faults overlap freely across members; on one member
// the member faults (kill, pause, disk, bit flip, skew, lie, power loss)
// do not overlap, a member whose log took a bit flip is targeted no more
// (it may stay down), bit flips hit a minority, and every action ends by
// Span.
func Generate(seed uint64, o GenOptions) Schedule {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := o.Members
	if n == 0 {
		n = 3
		if seed%5 == 0 {
			n = 5
		}
	}
	if o.Span <= 0 {
		o.Span = 2 * time.Second
	}
	if o.MaxActions < 2 {
		o.MaxActions = 6
	}
	s := Schedule{Seed: seed, Members: n, Span: o.Span}
	lrng := rand.New(rand.NewPCG(seed, 0x11e5))
	if n == 3 && o.Span >= 34*step && lrng.IntN(lieEvery) == 0 {
		s.Actions = lyingDisk(lrng, o.Span)
		return s
	}
	busy := make([][]Action, n) // member faults per member
	flipped := map[int]bool{}
	gone := map[int]bool{} // removed (or replaced) initial members
	removes, replaces := 0, 0
	// live reports whether, with removes removals and replaces
	// replacements (each removes before it adds) in any order of their
	// times, and adds not counted, the smallest configuration keeps two
	// voters and a majority of them when flips members stay down.
	live := func(removes, replaces, flips int) bool {
		v := n - removes
		if replaces > 0 {
			v--
		}
		return v >= 2 && v-flips > v/2
	}
	total := 0
	for _, w := range weights {
		total += w.w
	}
	slots := int(o.Span / step)
	want := 2 + rng.IntN(o.MaxActions-1)
	for tries := 0; len(s.Actions) < want && tries < 50; tries++ {
		r := rng.IntN(total)
		var k Kind
		for _, w := range weights {
			if r -= w.w; r < 0 {
				k = w.kind
				break
			}
		}
		at := time.Duration(rng.IntN(slots-2)) * step
		span := time.Duration(2+rng.IntN(min(16, slots-int(at/step)-1))) * step
		if at+span > o.Span {
			span = o.Span - at
		}
		a := Action{At: at, For: span, Kind: k}
		pick := func() int {
			m := rng.IntN(n)
			for k := 0; k < n && gone[m]; k++ {
				m = (m + 1) % n
			}
			return m
		}
		pair := func() []int {
			x := pick()
			y := (x + 1 + rng.IntN(n-1)) % n
			return []int{x, y}
		}
		switch k {
		case Kill, Pause:
			if rng.IntN(2) == 0 {
				a.Members = []int{Leader} // whoever leads then; a clash is skipped at run time
				break
			}
			fallthrough
		case Fsync, DiskFull, Skew, BitFlip:
			m := pick()
			if flipped[m] || overlaps(busy[m], a) || (k == BitFlip && len(busy[m]) > 0) {
				continue
			}
			if k == BitFlip {
				if len(flipped) >= (n-1)/2 || !live(removes, replaces, len(flipped)+1) {
					continue
				}
				flipped[m] = true
				a.Target = "log"
				if rng.IntN(3) == 0 {
					a.Target = "snap"
				}
			}
			if k == Skew {
				a.Skew = time.Duration(rng.IntN(40)-20) * step
			}
			a.Members = []int{m}
			busy[m] = append(busy[m], a)
		case Partition:
			perm := rng.Perm(n)
			a.Members = perm[:1+rng.IntN(n/2)]
			if rng.IntN(2) == 0 {
				a.Members = []int{Leader} // the leader isolated
				if rng.IntN(2) == 0 && a.For > 3*step {
					// ... and killed while cut off, after it may have taken
					// proposals it cannot commit: it restarts as a deposed
					// leader with an uncommitted tail.
					at := a.At + time.Duration(2+rng.IntN(int(a.For/step)-2))*step
					kill := Action{At: at, For: min(time.Duration(2+rng.IntN(8))*step, o.Span-at), Kind: Kill, Members: []int{Isolated}}
					if kill.For > 0 {
						s.Actions = append(s.Actions, kill)
					}
				}
			}
		case Mute:
			// The deposed leader: the leader cannot speak but still hears,
			// while clients keep proposing to it (its uncommitted tail
			// grows); the others elect and commit past it, and the new
			// leader's appends reach it at once. Half the time the new
			// leader is deposed the same way right after, and half the
			// heals come with duplicated, delayed messages.
			a.Members = []int{Leader}
			a.For = max(a.For, min(8*step, o.Span-a.At))
			if a.For < 4*step {
				continue
			}
			if rng.IntN(3) != 0 && o.Span >= 28*step {
				// ... aimed at the commit clamp: the second follower lags
				// (the leader's link to it cut from shortly before), so
				// the first one wins (with three members); its disk stalls
				// once it is cut off from the deposed leader, so its no-op
				// is stored late while its appends to the deposed leader,
				// whose answers are lost, back off (see Stall). The mute
				// outlasts the election and the back-offs.
				a.At = min(max(a.At, 4*step), o.Span-24*step) // a leader is known; it fits
				from := a.At - 3*step
				a.For = 24 * step
				stall := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}[rng.IntN(2)]
				s.Actions = append(s.Actions,
					Action{At: from, For: a.End() - from, Kind: OneWay, Members: []int{Leader, Follower2}},
					Action{At: a.At + 2*step, For: a.For - 2*step, Kind: Stall, Members: []int{Follower}, Delay: stall})
			}
			end := a.End()
			if rng.IntN(2) == 0 && end+6*step <= o.Span {
				next := Action{At: end, For: min(time.Duration(6+rng.IntN(6))*step, o.Span-end), Kind: Mute, Members: []int{Leader}}
				s.Actions = append(s.Actions, next)
				end = next.End()
			}
			if rng.IntN(2) == 0 && end+2*step <= o.Span {
				s.Actions = append(s.Actions, Action{At: end, For: min(6*step, o.Span-end), Kind: Net,
					Dup: float64(1+rng.IntN(3)) / 20, Delay: time.Duration(1+rng.IntN(3)) * 5 * time.Millisecond})
			}
		case Bridge, OneWay:
			a.Members = pair()
		case Flap:
			a.Members = pair()
			a.Period = time.Duration(1+rng.IntN(4)) * step
		case Net:
			a.Drop = float64(rng.IntN(4)) / 20
			a.Dup = float64(rng.IntN(3)) / 20
			a.Delay = time.Duration(rng.IntN(4)) * 5 * time.Millisecond
		case Transfer:
			a.For = 0
		case Add, Remove, Replace:
			// Membership changes run in the background from At (the
			// catch-up of an added member overlaps the faults after it).
			// Removals and replacements keep a live majority of at least
			// two voters whatever the order of their times (see live); a
			// flipped member is never removed.
			a.For = 0
			if k != Remove && s.Spare >= maxSpare {
				continue
			}
			if k == Remove && !live(removes+1, replaces, len(flipped)) || k == Replace && !live(removes, replaces+1, len(flipped)) {
				continue
			}
			if k != Add {
				victim := Leader
				if rng.IntN(2) == 0 {
					if victim = pick(); gone[victim] || flipped[victim] {
						continue
					}
					gone[victim] = true
				}
				a.Members = []int{victim}
			}
			if k != Remove {
				a.Members = append(a.Members, n+s.Spare)
				s.Spare++
			}
			removes += map[Kind]int{Remove: 1}[k]
			replaces += map[Kind]int{Replace: 1}[k]
		}
		s.Actions = append(s.Actions, a)
	}
	if lrng.IntN(randomLieEvery) == 0 {
		if a, ok := randomLie(lrng, s, busy); ok {
			s.Actions = append(s.Actions, a)
			if m := a.Members[0]; m >= 0 {
				busy[m] = append(busy[m], a)
			}
		}
	}
	// Power losses come from a stream of their own too, drawn last, so
	// that adding them changed no other action of any seed.
	prng := rand.New(rand.NewPCG(seed, 0x90e71055))
	if prng.IntN(powerLossEvery) == 0 {
		s.Actions = append(s.Actions, powerLoss(prng, s, busy, flipped, gone)...)
	}
	sortActions(s.Actions)
	return s
}

// powerLossEvery: about one seed in powerLossEvery (but the lying-disk
// composites) gets one power loss, from a stream of its own.
const powerLossEvery = 4

// powerLoss returns one power loss of 100-450ms (then the member
// restarts, as after a kill) on the leader (half the time) or a random
// member that has no member fault in the span, was not removed and took
// no bit flip; none when the member drawn is busy. Half the losses of the
// leader come with its disk stalled 50-100ms before (the stall action's
// first fsync takes 250 or 500ms longer), so that the power goes while
// entries the leader wrote, and sent, are not yet on its disk.
func powerLoss(rng *rand.Rand, s Schedule, busy [][]Action, flipped, gone map[int]bool) []Action {
	slots := int(s.Span / step)
	if slots < 8 {
		return nil
	}
	at := time.Duration(2+rng.IntN(slots-4)) * step
	a := Action{At: at, For: min(time.Duration(2+rng.IntN(8))*step, s.Span-at), Kind: PowerLoss}
	if rng.IntN(2) == 0 {
		a.Members = []int{Leader} // whoever leads then; a clash is skipped at run time
		if rng.IntN(2) == 0 {
			from := at - time.Duration(1+rng.IntN(2))*step
			stall := Action{At: from, For: a.At - from + step, Kind: Stall, Members: []int{Leader},
				Delay: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}[rng.IntN(2)]}
			return []Action{stall, a}
		}
		return []Action{a}
	}
	m := rng.IntN(s.Members)
	if flipped[m] || gone[m] || overlaps(busy[m], a) {
		return nil
	}
	a.Members = []int{m}
	return []Action{a}
}

// randomLieEvery: about one other seed in randomLieEvery gets one lie on
// a random member (drawn from the lie stream too).
const randomLieEvery = 10

// randomLie returns a lie on a random member that has no member fault in
// the span, or the leader: not in a schedule that changes the membership
// (a lost configuration change would be the fault's, and the membership
// checker judges the harness's view) or flips a bit (a member left down
// and a diverged one could leave no majority that can make progress).
func randomLie(rng *rand.Rand, s Schedule, busy [][]Action) (Action, bool) {
	for _, a := range s.Actions {
		if a.Kind == BitFlip || a.Kind.instant() && a.Kind != Transfer {
			return Action{}, false
		}
	}
	slots := int(s.Span / step)
	at := time.Duration(rng.IntN(slots-4)) * step
	a := Action{At: at, For: min(time.Duration(4+rng.IntN(9))*step, s.Span-at), Kind: Lie}
	m := rng.IntN(s.Members + 1)
	if m == s.Members {
		a.Members = []int{Leader} // a clash with another member fault is skipped at run time
		return a, true
	}
	if overlaps(busy[m], a) {
		return Action{}, false
	}
	a.Members = []int{m}
	return a, true
}

// lieEvery: one three-member seed in lieEvery is the lying-disk composite
// (drawn from a stream of its own, so the other seeds' schedules do not
// depend on it).
const lieEvery = 6

// lyingDisk is the composite aimed at the guard's G4 refusal (docs/chaos.md,
// "A lying disk"): committed entries vanish from a majority. The second
// follower is killed (clients leave it alone), so the leader commits with
// the first follower only, whose log lies from shortly after; the leader
// is cut off, then the lying follower loses power (its log as it was when
// the lie began) and restarts; it and the second follower, restarted, form
// a majority without the lost entries, elect a leader and write at their
// indexes; when the old leader heals it is asked to cut entries it
// committed and applied.
func lyingDisk(rng *rand.Rand, span time.Duration) []Action {
	at := time.Duration(4+rng.IntN(3)) * step                  // a leader is known
	lie := time.Duration(5+rng.IntN(4)) * step                 // the lie lasts 250-400ms
	cut := at + step + lie - time.Duration(1+rng.IntN(2))*step // the leader is cut off 50-100ms before the power loss
	// The old leader heals 500-650ms after the power loss: long enough for
	// the others to restart, elect and write, and early enough that the
	// new leader has not yet taken a snapshot and compacted the index its
	// replication to the old leader starts from (it would send that
	// snapshot, which the old leader installs without noticing: a gap,
	// docs/chaos.md, "A lying disk"). Early and short, so fewer entries
	// reach the logs before the heal.
	heal := min(at+step+lie+time.Duration(10+rng.IntN(4))*step, span)
	return []Action{
		{At: at, For: lie + 2*step, Kind: Kill, Members: []int{Follower2}},
		{At: at + step, For: lie, Kind: Lie, Members: []int{Follower}},
		{At: cut, For: heal - cut, Kind: Partition, Members: []int{Leader}},
	}
}

// overlaps reports whether a overlaps any of as in time.
func overlaps(as []Action, a Action) bool {
	for _, b := range as {
		if a.At < b.End() && b.At < a.End() {
			return true
		}
	}
	return false
}
