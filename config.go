package jobraft

import (
	"fmt"
	"maps"
	"time"

	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/logdigest"
	"github.com/jobraft/jobraft/raft"
)

// Config configures a Controller. The embedded raft.Config configures the
// member (ID, DataDir, BindAddr, bootstrap, timeouts, Clock); the rest are
// job defaults and controller limits. Zero values take the defaults listed.
type Config struct {
	raft.Config

	// LeaseTTL is the lease of a claim that names none (default 30s).
	LeaseTTL time.Duration
	// MaxAttempts and Backoff are the retry policy of jobs submitted
	// without one (defaults: fsm.DefaultMaxAttempts; 1s ×2 up to 1h).
	MaxAttempts uint32
	Backoff     fsm.Backoff

	// Retention of terminal (succeeded, dead, canceled) jobs: the leader
	// removes those finished more than RetainFor ago (default 24h; negative:
	// keep forever) and, per queue, the oldest beyond RetainPerQueue
	// (default 0: no count limit). An idempotency key lives as long as its
	// job: RetainFor is the idempotency window of finished jobs.
	RetainFor      time.Duration
	RetainPerQueue uint32
	// SweepInterval is how often the leader proposes a retention sweep
	// (default 1m).
	SweepInterval time.Duration
	// ExpireInterval is how often the leader proposes the lease expiry
	// command (default 1s, at most LeaseTTL/4). A lease is reclaimed at most
	// ExpireInterval after its deadline.
	ExpireInterval time.Duration

	// MaxPayload caps a job's payload (default and maximum fsm.MaxPayload).
	MaxPayload int
	// Submit batching: concurrent submits on this member are coalesced into
	// shared raft entries of at most BatchMaxJobs jobs (default 1024, max
	// fsm.MaxSubmit) and about BatchMaxBytes bytes (default 1 MiB, at most
	// MaxCommandSize; one job bigger than that travels alone), with at
	// most BatchInflight entries in flight (default 4); whatever arrives
	// meanwhile waits for the next.
	BatchMaxJobs  int
	BatchMaxBytes int
	BatchInflight int
	// BatchHold is how long the next entries may wait for the callers of
	// one just answered to come back (default 300µs; negative: never).
	// When an entry of two or more requests commits, its callers tend to
	// send their next at once (a worker acks the job it claimed, submits
	// the next); waiting for them — until as many requests are queued, in
	// the submit and the lease-command batchers together, as were waiting
	// plus those answered, or BatchHold — puts them in one replication
	// round instead of several: at 64 concurrent clients it about halves
	// the fsyncs per submit and per job cycle. A lone caller is never held;
	// after three holds in a row that ran out, only one entry in 16 holds
	// until one fills (Stats.BatchHolds, BatchHoldsExpired).
	BatchHold time.Duration
	// ProposeTimeout bounds one raft proposal the controller makes on the
	// caller's behalf (default 10s). Submit retries past it while its own
	// context allows.
	ProposeTimeout time.Duration
	// ClaimPollInterval bounds how long a long-polling Claim waits between
	// attempts when nothing it can see locally became claimable (default
	// 1s): it covers scheduled jobs that become due by the leader's clock.
	ClaimPollInterval time.Duration

	// WatchRetainEntries and WatchRetainBytes bound the in-memory event
	// history Watch can resume from (defaults 65536 entries, 64 MiB).
	WatchRetainEntries int
	WatchRetainBytes   int
}

// defaultLeaseTTL is Config.LeaseTTL's default.
const defaultLeaseTTL = 30 * time.Second

// leaseTTL is the lease TTL of a claim or worker that asked for ttl: its
// own, or Config.LeaseTTL when it names none (ttl <= 0).
func (c *Config) leaseTTL(ttl time.Duration) time.Duration {
	if ttl > 0 {
		return ttl
	}
	return c.LeaseTTL
}

func (c Config) withDefaults() (Config, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.LeaseTTL, defaultLeaseTTL)
	def(&c.RetainFor, 24*time.Hour)
	def(&c.SweepInterval, time.Minute)
	def(&c.ExpireInterval, time.Second)
	def(&c.ProposeTimeout, 10*time.Second)
	def(&c.ClaimPollInterval, time.Second)
	if c.LeaseTTL < 0 || c.LeaseTTL > fsm.MaxLeaseTTL {
		return c, fmt.Errorf("%w: lease TTL %v out of (0, %v]", ErrInvalidConfig, c.LeaseTTL, fsm.MaxLeaseTTL)
	}
	if c.ExpireInterval > c.LeaseTTL/4 {
		c.ExpireInterval = max(c.LeaseTTL/4, time.Millisecond)
	}
	if c.MaxAttempts > fsm.MaxAttempts {
		return c, fmt.Errorf("%w: max attempts %d above %d", ErrInvalidConfig, c.MaxAttempts, fsm.MaxAttempts)
	}
	if c.MaxPayload <= 0 || c.MaxPayload > fsm.MaxPayload {
		c.MaxPayload = fsm.MaxPayload
	}
	if c.BatchMaxJobs <= 0 {
		c.BatchMaxJobs = 1024
	}
	c.BatchMaxJobs = min(c.BatchMaxJobs, fsm.MaxSubmit)
	if c.BatchMaxBytes <= 0 {
		c.BatchMaxBytes = 1 << 20
	}
	// An entry the node refuses as too large would fail every submit
	// batched into it: never batch past the node's command limit (its
	// default is 4 MiB). The per-job sizes summed by the batcher
	// over-count the combined command, so this bound is enough.
	maxCmd := c.MaxCommandSize
	if maxCmd <= 0 {
		maxCmd = 4 << 20
	}
	c.BatchMaxBytes = min(c.BatchMaxBytes, maxCmd)
	if c.BatchInflight <= 0 {
		c.BatchInflight = 4
	}
	switch {
	case c.BatchHold == 0:
		c.BatchHold = 300 * time.Microsecond
	case c.BatchHold < 0:
		c.BatchHold = 0
	}
	if c.WatchRetainEntries <= 0 {
		c.WatchRetainEntries = 65536
	}
	if c.WatchRetainBytes <= 0 {
		c.WatchRetainBytes = 64 << 20
	}
	// Every member serves walcompare's digest protocol (its online
	// comparison), beside the host's own log services; the member links
	// the protocol (internal/logdigest), not walcompare.
	svcs := maps.Clone(c.LogServices)
	if svcs == nil {
		svcs = map[string]raft.LogService{}
	}
	svcs[logdigest.Method] = logdigest.Serve
	c.LogServices = svcs
	return c, nil
}
