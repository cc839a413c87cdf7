package catchup

import "time"

// Policy bounds catch-up. The zero value of a field takes its default
// (WithDefaults).
type Policy struct {
	// ElectionTimeout is how long the last round may take (required).
	ElectionTimeout time.Duration
	// MaxRounds bounds the slow rounds a candidate gets (default 10): rounds
	// longer than an election timeout, except those that ended in at most
	// 3/4 of the previous round's time (the candidate converges; after a
	// long install it replays the backlog in rounds that shrink).
	MaxRounds int
	// NoProgressRounds: a member behind the leader whose last index (or
	// snapshot stream) has not moved for this many election timeouts is
	// stalled (default 20). A snapshot stream counts as progress while its
	// bytes move, and once all were sent while the install is in flight
	// (the member seals and restores it before it answers).
	NoProgressRounds int
	// UnreachableRounds: a member that sent no progress report for this many
	// election timeouts is stalled (default 20).
	UnreachableRounds int
	// InstallFailures: this many failed snapshot installs without the
	// member's log moving in between stall a member (default 3).
	InstallFailures int
	// GuardRefusals: this many observations in which the member's guard
	// refused more appends, without its log moving in between, stall it
	// (default 3).
	GuardRefusals int
	// NearLag is how far a member that is not a candidate may trail the
	// leader's last index and still be CaughtUp: under load a healthy
	// follower trails by the appends in flight (default 0: not at all).
	// Rounds ignore it.
	NearLag uint64
	// MaxStreamBytesPerSecond bounds the bytes per second the leader
	// streams to members catching up, all of them together: snapshot
	// chunks to any member, and appends to a non-voter that is not caught
	// up (Throttle). Heartbeats and appends to voters are never throttled.
	// 0 takes DefaultMaxStreamBytesPerSecond; negative is unlimited. Keep
	// it well above the cluster's own write rate (a non-voter is fed its
	// appends at it) and above 256 KiB per second of the raft transport's
	// timeout (hashicorp/raft's deadline for a snapshot stream).
	MaxStreamBytesPerSecond int64
}

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&p.MaxRounds, 10)
	def(&p.NoProgressRounds, 20)
	def(&p.UnreachableRounds, 20)
	def(&p.InstallFailures, 3)
	def(&p.GuardRefusals, 3)
	if p.MaxStreamBytesPerSecond == 0 {
		p.MaxStreamBytesPerSecond = DefaultMaxStreamBytesPerSecond
	}
	return p
}
