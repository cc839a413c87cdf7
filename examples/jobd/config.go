package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/transport"
)

// options is jobd's configuration: flags, optionally preset by a JSON file
// (-config) whose keys are the flag names. Flags given on the command line
// win over the file.
type options struct { // the json tags name the config-file keys (= flag names)
	// nodeOpts are internal node options (tests: a fault-injecting log
	// filesystem); never set from flags or the config file.
	nodeOpts  []raft.Option
	ID        string `json:"id"`
	DataDir   string `json:"data"`
	RaftAddr  string `json:"raft-addr"`
	Advertise string `json:"advertise"`
	HTTPAddr  string `json:"http-addr"`
	Peers     string `json:"peers"` // id=host:port,id=host:port (the initial members, this one included)
	Bootstrap bool   `json:"bootstrap"`
	Join      bool   `json:"join"`
	ClusterID string `json:"cluster-id"`

	Token     string `json:"token"`
	TokenFile string `json:"token-file"`

	APICert string `json:"api-cert"`
	APIKey  string `json:"api-key"`

	ClusterCA       string `json:"cluster-ca"`
	ClusterCert     string `json:"cluster-cert"`
	ClusterKey      string `json:"cluster-key"`
	InsecureCluster bool   `json:"insecure-cluster"`

	Queues        string        `json:"queues"` // queue=concurrency,...
	Workers       bool          `json:"workers"`
	Exec          stringList    `json:"exec"` // kind=shell command (opt-in)
	LeaseTTL      time.Duration `json:"lease-ttl"`
	MaxBody       int64         `json:"max-body"`
	MaxConns      int           `json:"max-conns"`
	ReadTimeout   time.Duration `json:"read-timeout"`
	Heartbeat     time.Duration `json:"heartbeat"`
	Election      time.Duration `json:"election"`
	LeaderWait    time.Duration `json:"leader-wait"`
	RetainFor     time.Duration `json:"retain-for"`
	SnapshotEvery uint64        `json:"snapshot-threshold"`
	SnapshotRatio float64       `json:"snapshot-log-ratio"`
	LogLevel      string        `json:"log-level"`
	ShutdownGrace time.Duration `json:"shutdown-grace"`
	UnservedAfter time.Duration `json:"unserved-after"`
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ";") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func defaults() options {
	return options{
		RaftAddr: "127.0.0.1:7400", HTTPAddr: "127.0.0.1:8400",
		Queues: "default=8", Workers: true, LeaseTTL: 30 * time.Second, MaxBody: 2 << 20,
		MaxConns: 1024, ReadTimeout: 10 * time.Second,
		Heartbeat: raft.DefaultHeartbeatTimeout, Election: raft.DefaultElectionTimeout, LeaderWait: raft.DefaultLeaderWait,
		RetainFor: 24 * time.Hour, LogLevel: "info", ShutdownGrace: 10 * time.Second, UnservedAfter: time.Minute,
		SnapshotRatio: raft.DefaultSnapshotLogRatio,
	}
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.ID, "id", o.ID, "member ID, unique and stable across restarts (required)")
	fs.StringVar(&o.DataDir, "data", o.DataDir, "data directory: log and snapshots (required)")
	fs.StringVar(&o.RaftAddr, "raft-addr", o.RaftAddr, "member-to-member listen address (raft, forwarding, status)")
	fs.StringVar(&o.Advertise, "advertise", o.Advertise, "address peers dial (default: -raft-addr)")
	fs.StringVar(&o.HTTPAddr, "http-addr", o.HTTPAddr, "HTTP API listen address")
	fs.StringVar(&o.Peers, "peers", o.Peers, "initial members id=host:port,... (this member included); empty: a one-member cluster (bootstrapped)")
	fs.BoolVar(&o.Bootstrap, "bootstrap", o.Bootstrap, "bootstrap the cluster with -peers when the data dir is empty (give it to every initial member)")
	fs.BoolVar(&o.Join, "join", o.Join, "first start of a member added to a running cluster: wait to be added (POST /v1/cluster/members) instead of bootstrapping; needs -cluster-id, no -peers or -bootstrap")
	fs.StringVar(&o.ClusterID, "cluster-id", o.ClusterID, "cluster name kept in the data dir at first start and checked at every start (default: derived from -peers)")
	fs.StringVar(&o.Token, "token", o.Token, "API bearer token (or env JOBD_TOKEN, or -token-file)")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "file holding the API bearer token")
	fs.StringVar(&o.APICert, "api-cert", o.APICert, "TLS certificate for the HTTP API (PEM); with -api-key enables HTTPS")
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "TLS key for the HTTP API (PEM)")
	fs.StringVar(&o.ClusterCA, "cluster-ca", o.ClusterCA, "CA (PEM) that member certificates are verified against: enables mTLS between members")
	fs.StringVar(&o.ClusterCert, "cluster-cert", o.ClusterCert, "this member's certificate (PEM), used as TLS server and client")
	fs.StringVar(&o.ClusterKey, "cluster-key", o.ClusterKey, "this member's key (PEM)")
	fs.BoolVar(&o.InsecureCluster, "insecure-cluster", o.InsecureCluster, "allow a non-loopback -raft-addr without mTLS")
	fs.StringVar(&o.Queues, "queues", o.Queues, "queues the built-in workers serve, queue=concurrency,...")
	fs.BoolVar(&o.Workers, "workers", o.Workers, "run the built-in worker pool")
	fs.Var(&o.Exec, "exec", "opt-in shell handler kind=command (repeatable): runs `sh -c command` with the payload on stdin")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", o.LeaseTTL, "default lease TTL")
	fs.Int64Var(&o.MaxBody, "max-body", o.MaxBody, "largest accepted request body in bytes")
	fs.IntVar(&o.MaxConns, "max-conns", o.MaxConns, "most concurrent API connections (watch streams included); more wait to be accepted")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", o.ReadTimeout, "how long a client may take to send a request's headers, and then its body")
	fs.DurationVar(&o.Heartbeat, "heartbeat", o.Heartbeat, "raft heartbeat timeout")
	fs.DurationVar(&o.Election, "election", o.Election, "raft election timeout")
	fs.DurationVar(&o.LeaderWait, "leader-wait", o.LeaderWait, "how long a request waits to reach a leader before it is answered 503 (no quorum: the reason says how many voters are reachable)")
	fs.DurationVar(&o.RetainFor, "retain-for", o.RetainFor, "how long finished jobs are kept (negative: forever)")
	fs.Uint64Var(&o.SnapshotEvery, "snapshot-threshold", o.SnapshotEvery, "entries between automatic snapshots, at least (0: default 8192)")
	fs.Float64Var(&o.SnapshotRatio, "snapshot-log-ratio", o.SnapshotRatio, "snapshot once the log written since the last snapshot holds this fraction of its size (and -snapshot-threshold entries); negative: by -snapshot-threshold entries alone")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "trace, debug, info, warn, error")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace", o.ShutdownGrace, "how long SIGTERM waits for running jobs and requests")
	fs.DurationVar(&o.UnservedAfter, "unserved-after", o.UnservedAfter, "a queue and kind whose jobs wait this long with none of them claimed is reported unserved (stats, metric jobd_pending_unserved_jobs)")
}

// parseOptions reads -config (if given) and then the flags over it. The
// file is a JSON object whose keys are flag names and whose values are
// written as on the command line ("30s", "default=8", true, 4096; a list
// for the repeatable -exec).
func parseOptions(args []string) (options, error) {
	o := defaults()
	fs := flag.NewFlagSet("jobd", flag.ContinueOnError)
	fs.String("config", "", "JSON file of options (keys are flag names; the command line wins)")
	o.register(fs)
	// First pass: only to find -config.
	pre := flag.NewFlagSet("jobd", flag.ContinueOnError)
	pre.SetOutput(discard{})
	var scratch options
	scratch.register(pre)
	preCfg := pre.String("config", "", "")
	_ = pre.Parse(args)
	if *preCfg != "" {
		if err := applyFile(fs, *preCfg); err != nil {
			return o, err
		}
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.validate()
}

func applyFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for k, raw := range m {
		if k == "config" || fs.Lookup(k) == nil {
			return fmt.Errorf("config %s: unknown option %q", path, k)
		}
		var vals []string
		var one string
		if json.Unmarshal(raw, &vals) != nil {
			if json.Unmarshal(raw, &one) != nil {
				one = string(raw) // a number or a boolean
			}
			vals = []string{one}
		}
		for _, v := range vals {
			if err := fs.Set(k, v); err != nil {
				return fmt.Errorf("config %s: %s: %w", path, k, err)
			}
		}
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (o *options) validate() error {
	var errs []error
	if o.ID == "" {
		errs = append(errs, errors.New("-id is required"))
	}
	if o.DataDir == "" {
		errs = append(errs, errors.New("-data is required"))
	}
	if (o.APICert == "") != (o.APIKey == "") {
		errs = append(errs, errors.New("-api-cert and -api-key go together"))
	}
	tlsFlags := 0
	for _, s := range []string{o.ClusterCA, o.ClusterCert, o.ClusterKey} {
		if s != "" {
			tlsFlags++
		}
	}
	if tlsFlags != 0 && tlsFlags != 3 {
		errs = append(errs, errors.New("-cluster-ca, -cluster-cert and -cluster-key go together"))
	}
	if tlsFlags == 0 && !o.InsecureCluster && !transport.IsLoopback(o.RaftAddr) {
		errs = append(errs, fmt.Errorf("-raft-addr %s is not loopback: give -cluster-ca/-cluster-cert/-cluster-key (mTLS) or -insecure-cluster", o.RaftAddr))
	}
	if o.MaxBody < 1024 {
		errs = append(errs, errors.New("-max-body must be at least 1024"))
	}
	if o.MaxConns < 1 {
		errs = append(errs, errors.New("-max-conns must be at least 1"))
	}
	if o.ReadTimeout <= 0 {
		errs = append(errs, errors.New("-read-timeout must be positive"))
	}
	if o.LeaderWait <= 0 {
		errs = append(errs, fmt.Errorf("-leader-wait %v: must be positive", o.LeaderWait))
	}
	if r := o.SnapshotRatio; math.IsNaN(r) || math.IsInf(r, 0) || r > raft.MaxSnapshotLogRatio {
		errs = append(errs, fmt.Errorf("-snapshot-log-ratio %v: must be at most %v (negative: snapshots by entries alone)", r, raft.MaxSnapshotLogRatio))
	}
	if o.Join && (o.Bootstrap || o.Peers != "" || o.ClusterID == "") {
		errs = append(errs, errors.New("-join needs -cluster-id (the cluster_id of GET /v1/cluster/members) and no -peers or -bootstrap"))
	}
	if _, err := o.members(); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseQueues(o.Queues); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseExec(o.Exec); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// members parses -peers; nil means this member alone.
func (o *options) members() ([]raft.Member, error) {
	if strings.TrimSpace(o.Peers) == "" {
		return nil, nil // this member alone, at its bound address
	}
	var out []raft.Member
	self := false
	seen, seenAddr := map[string]bool{}, map[string]bool{}
	for _, p := range strings.Split(o.Peers, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("-peers: %q is not id=host:port", p)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("-peers: %q: %v", p, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("-peers: member %q twice", id)
		}
		if seenAddr[addr] {
			return nil, fmt.Errorf("-peers: address %s twice", addr)
		}
		seen[id], seenAddr[addr] = true, true
		if id == o.ID {
			self = true
			if mine := o.advertised(); !sameEndpoint(addr, mine) {
				return nil, fmt.Errorf("%w: -peers has %s=%s, but this member is at %s (-raft-addr/-advertise): is another member started with -id %s?",
					errSelfAddress, id, addr, mine, id)
			}
		}
		out = append(out, raft.Member{ID: id, Address: addr, Voter: true})
	}
	if !self {
		return nil, fmt.Errorf("-peers does not name this member (%q)", o.ID)
	}
	return out, nil
}

// advertised is the address peers dial to reach this member.
func (o *options) advertised() string {
	if o.Advertise != "" {
		return o.Advertise
	}
	return o.RaftAddr
}

// sameEndpoint reports whether the -peers address of this member can be
// the one it listens on or advertises: the same port, and the same host
// unless either is a name or this member listens on every address. (A
// mismatch it lets through, such as a name for another host, is not
// caught here.)
func sameEndpoint(peer, mine string) bool {
	ph, pp, err1 := net.SplitHostPort(peer)
	mh, mp, err2 := net.SplitHostPort(mine)
	if err1 != nil || err2 != nil || pp != mp {
		return false
	}
	if ph == mh || mh == "" {
		return true
	}
	pip, mip := net.ParseIP(ph), net.ParseIP(mh)
	if pip == nil || mip == nil {
		return true // a name: not resolved here
	}
	return mip.IsUnspecified() || pip.Equal(mip)
}

// token returns the API token from -token, JOBD_TOKEN or -token-file.
func (o *options) token() (string, error) {
	t := o.Token
	if t == "" {
		t = os.Getenv("JOBD_TOKEN")
	}
	if t == "" && o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		t = strings.TrimSpace(string(b))
	}
	if len(t) < 16 {
		return "", errors.New("an API token of at least 16 characters is required (-token, JOBD_TOKEN or -token-file)")
	}
	return t, nil
}

func parseQueues(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, n, ok := strings.Cut(p, "=")
		c := 1
		if ok {
			if _, err := fmt.Sscan(n, &c); err != nil || c < 1 || c > 1024 {
				return nil, fmt.Errorf("-queues: %q: concurrency must be 1..1024", p)
			}
		}
		out[name] = c
	}
	return out, nil
}

func parseExec(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range list {
		kind, cmd, ok := strings.Cut(e, "=")
		if !ok || kind == "" || strings.TrimSpace(cmd) == "" {
			return nil, fmt.Errorf("-exec: %q is not kind=command", e)
		}
		if _, builtin := builtinHandlers[kind]; builtin {
			return nil, fmt.Errorf("-exec: kind %q is a built-in handler", kind)
		}
		out[kind] = cmd
	}
	return out, nil
}
