package raft

import (
	"context"
	"crypto/tls"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/catchup"
)

// Member is one member of the cluster as the configuration names it.
type Member struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// Voter is false for a non-voter (a member still catching up).
	Voter bool `json:"voter"`
}

// Default raft timing, for a LAN (docs/timing.md): a dead leader is
// replaced, and submits flow again, in about half a second.
const (
	DefaultHeartbeatTimeout   = 250 * time.Millisecond
	DefaultElectionTimeout    = 250 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultCommitTimeout      = 5 * time.Millisecond
	// DefaultLeaderWait is Config.LeaderWait's default: many elections'
	// worth on a LAN, short enough that a request without a quorum is
	// answered while its caller still waits.
	DefaultLeaderWait = 5 * time.Second
)

// Snapshot cadence by log bytes (Config.SnapshotLogRatio, cadence.go).
const (
	// DefaultSnapshotLogRatio is Config.SnapshotLogRatio's default: a
	// member snapshots once the entries it applied since its last snapshot
	// hold half that snapshot's size in bytes.
	DefaultSnapshotLogRatio = 0.5
	// SnapshotLogRatioOff, or any negative ratio, turns the byte rule off:
	// a member snapshots every SnapshotThreshold entries whatever its
	// state's size (hashicorp/raft's own rule, as before the byte rule).
	SnapshotLogRatioOff = -1.0
	// MaxSnapshotLogRatio bounds Config.SnapshotLogRatio: past it the log a
	// restart replays, and the disk it holds, would dwarf the state.
	MaxSnapshotLogRatio = 100.0
)

// Config configures a Node. ID, DataDir and BindAddr are required.
type Config struct {
	// ID names the member; it must be unique in the cluster and stable
	// across restarts.
	ID string
	// DataDir holds the log (DataDir/log) and snapshots (DataDir/snapshots).
	DataDir string
	// BindAddr is the one TCP address the member listens on for raft
	// traffic, forwarded proposals and reads, and status RPCs.
	BindAddr string
	// AdvertiseAddr is what peers dial (default: the bound address).
	AdvertiseAddr string
	// TLS enables mutual TLS between members (see transport.Config.TLS).
	TLS *tls.Config
	// AllowInsecure permits a non-loopback BindAddr without TLS.
	AllowInsecure bool

	// ClusterID names the cluster (optional). When set, joins are checked
	// on both sides: the leader's AddMember refuses a member whose
	// ClusterID differs (ErrClusterMismatch) or that does not answer
	// (ErrMemberUnreachable), and a member without state takes its first
	// append or snapshot only from a leader whose ClusterID equals its own
	// (clusterid.go). "" checks nothing.
	ClusterID string

	// Bootstrap makes a brand-new member bootstrap the cluster with
	// InitialMembers (itself alone when empty). It is ignored when the data
	// dir already holds state. A member that neither bootstraps nor has
	// state waits to be added by the leader (Node.AddMember).
	Bootstrap      bool
	InitialMembers []Member

	// Timeouts. The defaults (DefaultHeartbeatTimeout, ...) suit a LAN;
	// across a WAN raise them (docs/timing.md).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// MaxAppendEntries bounds entries per AppendEntries (default 256).
	MaxAppendEntries int
	// SnapshotInterval, SnapshotThreshold and SnapshotLogRatio drive
	// automatic snapshots (defaults 30s, 8192 entries and 0.5); TrailingLogs
	// entries are kept after a snapshot (default 10240).
	//
	// Every SnapshotInterval (plus up to as much again, at random) a member
	// snapshots its state when its log holds at least SnapshotThreshold
	// entries past its last snapshot and the entries it applied since that
	// snapshot hold at least SnapshotLogRatio times the snapshot's size in
	// bytes (each entry's data and extensions as raft stores them: the
	// command, its envelope and the log's stamp). A snapshot writes the
	// whole state, so this keeps the snapshots' cost per byte written the
	// same whatever the state's size, and the log a restart replays after
	// the snapshot it restores near SnapshotLogRatio times that snapshot's
	// size (plus what was written during one check interval and one
	// snapshot). Before its first snapshot, and while the state is small,
	// the entry count alone decides, as before the byte rule. A restarted
	// member counts the bytes again as it replays the entries after the
	// snapshot it restored (raft/cadence.go); Node.SnapshotCadence shows
	// the counts.
	//
	// SnapshotLogRatio 0 takes DefaultSnapshotLogRatio; SnapshotLogRatioOff
	// (or any negative value) turns the byte rule off: a snapshot every
	// SnapshotThreshold entries whatever the state's size, decided by
	// hashicorp/raft as before. NaN, infinities and ratios above
	// MaxSnapshotLogRatio are refused (ErrInvalidConfig).
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	SnapshotLogRatio  float64
	TrailingLogs      uint64
	// SnapshotRetain is how many snapshots are kept (default 2).
	SnapshotRetain int

	// MaxCommandSize bounds one proposed command (default 4 MiB).
	MaxCommandSize int
	// ApplyTimeout bounds the wait to enqueue a proposal (default 5s).
	ApplyTimeout time.Duration
	// LeaderWait bounds how long an operation waits to reach a leader
	// (default DefaultLeaderWait): Propose's retries while no leader
	// takes the proposal, a LinearizableRead's wait for a read index, and
	// AddMember's and RemoveMember's wait for a leader. Past it they fail
	// with an error matching ErrNoLeader (a *NoLeaderError saying how
	// many voters this member reached), Propose's as ErrRejected: nothing
	// was committed. A proposal already handed to a leader is not cut
	// short by it (its outcome would be unknown): ctx bounds that.
	LeaderWait time.Duration

	// Clock is the leader's clock stamped into every command it proposes
	// (Entry.Time). Default time.Now; tests skew it per member.
	Clock func() time.Time

	// Logger receives line-based logs (default: hclog to stderr at Info):
	// one line per state change of the member ("leading", "following
	// leader"); hashicorp/raft's own lines below Warn only when Logger is
	// at Debug or finer.
	Logger hclog.Logger

	// CatchUp bounds the leader's catch-up policy for members it adds
	// (package catchup; zero fields take its defaults, ElectionTimeout this
	// Config's, NearLag MaxAppendEntries).
	CatchUp catchup.Policy

	// LogServices are read-only services about the member's log that it
	// serves on its RPC channel, by method name: walcompare's digest
	// protocol (walcompare.DigestMethod: walcompare.ServeDigest), which
	// jobraft.Open always adds, is one. A method of the member's own
	// ("jr.propose", ...) cannot be taken.
	LogServices map[string]LogService
}

// LogService answers one request about the member's log on its RPC channel
// (Config.LogServices): log is the guarded log, floor its persisted commit
// floor. It must only read log (FirstIndex, LastIndex, GetLog), and may run
// concurrently with appends. Its error's text is all the caller receives.
type LogService func(ctx context.Context, log hraft.LogStore, floor func() uint64, req []byte) ([]byte, error)

func (c Config) withDefaults() (Config, error) {
	if c.ID == "" || c.DataDir == "" || c.BindAddr == "" {
		return c, invalidConfig("ID, DataDir and BindAddr are required")
	}
	for method, svc := range c.LogServices {
		if _, own := ownHandlers[method]; own || svc == nil {
			return c, invalidConfig("log service %q: nil, or a method of the member's own", method)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.ElectionTimeout, DefaultElectionTimeout)
	def(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	def(&c.CommitTimeout, DefaultCommitTimeout)
	def(&c.SnapshotInterval, 30*time.Second)
	def(&c.ApplyTimeout, 5*time.Second)
	def(&c.LeaderWait, DefaultLeaderWait)
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		c.LeaderLeaseTimeout = c.HeartbeatTimeout
	}
	if c.MaxAppendEntries <= 0 {
		c.MaxAppendEntries = 256
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	switch r := c.SnapshotLogRatio; {
	case math.IsNaN(r) || math.IsInf(r, 0) || r > MaxSnapshotLogRatio:
		return c, invalidConfig("SnapshotLogRatio %v: want a ratio in (0, %v], 0 for the default %v, or a negative value (SnapshotLogRatioOff) to snapshot by entries alone",
			r, MaxSnapshotLogRatio, DefaultSnapshotLogRatio)
	case r == 0:
		c.SnapshotLogRatio = DefaultSnapshotLogRatio
	case r < 0:
		c.SnapshotLogRatio = SnapshotLogRatioOff
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.SnapshotRetain <= 0 {
		c.SnapshotRetain = 2
	}
	if c.MaxCommandSize <= 0 {
		c.MaxCommandSize = 4 << 20
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "jobraft", Level: hclog.Info})
	}
	c.Logger = c.Logger.With("member", c.ID)
	return c, nil
}
