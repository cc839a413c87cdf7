// Command jobd is an example host daemon built on jobraft: one member of a
// Raft-replicated job controller with an HTTP JSON API, a built-in worker
// pool, Prometheus metrics and health probes.
//
//	jobd -id n1 -data /var/lib/jobd -raft-addr 127.0.0.1:7401 -http-addr 127.0.0.1:8401 \
//	     -peers n1=127.0.0.1:7401,n2=127.0.0.1:7402,n3=127.0.0.1:7403 -bootstrap -token-file token
//	jobd gencerts -dir certs -names n1,n2,n3,api   # throwaway certificates for a local cluster (later runs: new names, same CA)
//	jobd restore -from cluster.jrb -data DIR -id n1 -peers ... -cluster-id NEW   # seed a member of a new cluster from a backup
//
// See README.md in the repository root for the API and every flag.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/wal"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gencerts" {
		if err := gencerts(os.Args[2:]); err != nil {
			exitUsage(err)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "restore" {
		if err := restoreCmd(os.Args[2:], os.Stdout); err != nil {
			if errors.Is(err, errRestoreUsage) || errors.Is(err, flag.ErrHelp) {
				exitUsage(err)
			}
			fmt.Fprintln(os.Stderr, "jobd restore:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		exitUsage(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "jobd", Level: hclog.LevelFromString(o.LogLevel), Output: os.Stderr})
	m := newMetrics()
	if err := m.installRaftSink(); err != nil {
		log.Error("metrics", "error", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d, err := start(ctx, o, m, log)
	if err != nil {
		log.Error("start", "error", err)
		os.Exit(1)
	}
	code := 0
	select {
	case <-ctx.Done():
	case <-d.removed:
		// Removed from the cluster: it takes no further part.
		log.Error("this member was removed from the cluster; exiting", "member", o.ID, "exit_status", exitRemoved,
			"rejoin", "remove its data dir and start it with -join, then add it again")
		code = exitRemoved
	}
	log.Info("shutting down", "grace", o.ShutdownGrace)
	if err := d.shutdown(o.ShutdownGrace); err != nil {
		log.Error("shutdown", "error", err)
		os.Exit(1)
	}
	log.Info("stopped")
	os.Exit(code)
}

// exitRemoved is jobd's exit status once its member was removed from the
// cluster (1 is a failed start or shutdown, 2 a usage error).
const exitRemoved = 3

// exitUsage ends jobd after a command-line error: status 2, or 0 when
// the usage was asked for (-h, -help; the flag package printed it).
func exitUsage(err error) {
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "jobd:", err)
	os.Exit(2)
}

// daemon is one running jobd: controller, workers, background watchers and
// the HTTP server.
type daemon struct {
	ctl      *jobraft.Controller
	srv      *http.Server
	ln       net.Listener
	unlock   func() // releases the data dir's lock
	scheme   string
	log      hclog.Logger
	stopWork context.CancelFunc
	stopBg   context.CancelFunc
	stopReqs context.CancelFunc
	workers  sync.WaitGroup
	bg       sync.WaitGroup
	// removed is closed once the member learns it was removed from the
	// cluster (raft.EventRemoved): jobd then exits (exitRemoved).
	removed chan struct{}
}

// start opens the member and serves the API until shutdown.
func start(ctx context.Context, o options, m *metrics, log hclog.Logger) (*daemon, error) {
	token, err := o.token()
	if err != nil {
		return nil, err
	}
	members, err := o.members()
	if err != nil {
		return nil, err
	}
	ctls, err := o.clusterTLS()
	if err != nil {
		return nil, err
	}
	atls, err := o.apiTLS()
	if err != nil {
		return nil, err
	}
	queues, _ := parseQueues(o.Queues)
	execs, _ := parseExec(o.Exec)
	// The data dir: locked, then its identity checked, before the member
	// opens it.
	unlock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	want := identity{Version: identityVersion, Cluster: o.clusterID(members), Member: o.ID, Peers: o.Peers}
	if err := checkIdentity(o.DataDir, want, o.ClusterID != ""); err != nil {
		unlock()
		return nil, err
	}
	// Listen first: a taken port fails before the member opens.
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("http listen: %w", err)
	}
	ctl, err := jobraft.Open(ctx, jobraft.Config{
		Config: raft.Config{
			ID: o.ID, DataDir: o.DataDir, BindAddr: o.RaftAddr, AdvertiseAddr: o.Advertise, ClusterID: want.Cluster,
			TLS: ctls, AllowInsecure: o.InsecureCluster, Bootstrap: (o.Bootstrap || members == nil) && !o.Join, InitialMembers: members,
			HeartbeatTimeout: o.Heartbeat, ElectionTimeout: o.Election, LeaderLeaseTimeout: o.Heartbeat, // raft's default ratio (docs/timing.md)
			SnapshotThreshold: o.SnapshotEvery, SnapshotLogRatio: o.SnapshotRatio, LeaderWait: o.LeaderWait, Logger: log.Named("raft"),
		},
		LeaseTTL: o.LeaseTTL, RetainFor: o.RetainFor,
	}, o.nodeOpts...)
	if err != nil {
		ln.Close()
		unlock()
		return nil, err
	}
	d := &daemon{ctl: ctl, ln: ln, unlock: unlock, log: log, scheme: "http", removed: make(chan struct{})}
	bgCtx, stopBg := context.WithCancel(context.Background())
	d.stopBg = stopBg
	served := newServedKinds(o.UnservedAfter)
	d.bg.Add(4)
	go func() { defer d.bg.Done(); countRefusals(bgCtx, ctl, m, d.removed) }()
	go func() { defer d.bg.Done(); countExpiries(bgCtx, ctl, m, log) }()
	go func() { defer d.bg.Done(); watchClaims(bgCtx, ctl, served) }()
	go func() {
		defer d.bg.Done()
		sampleServed(bgCtx, ctl, served, max(o.UnservedAfter/4, 100*time.Millisecond))
	}()
	m.reg.MustRegister(newClusterCollector(ctl, served), newLimitsCollector(ctl))
	m.scopeTo(ctl.Node())

	workCtx, stopWork := context.WithCancel(context.Background())
	d.stopWork = stopWork
	if o.Workers && len(queues) > 0 {
		d.workers.Add(1)
		go func() {
			defer d.workers.Done()
			err := ctl.Run(workCtx, jobraft.WorkerConfig{
				Worker: o.ID, Queues: queues, Handlers: handlers(o.ID, execs, m), LeaseTTL: o.LeaseTTL,
				OnError: func(j jobraft.Job, err error) {
					// IDs and errors only: never payload bytes.
					log.Debug("worker", "job", j.ID, "queue", j.Queue, "error", err)
				},
			})
			if err != nil {
				log.Error("workers", "error", err)
			}
		}()
	}

	reqCtx, stopReqs := context.WithCancel(context.Background())
	d.stopReqs = stopReqs
	s := newServer(ctl, o.ID, token, o, m, log.Named("http"), ctls)
	s.served = served
	s.clusterID = want.Cluster
	// Bounded: -max-conns connections at a time; -read-timeout for a
	// request's headers (and the TLS handshake), then again for its body
	// (boundBody); writeTimeout for each reply; idle keep-alive connections
	// closed after a minute.
	d.srv = &http.Server{
		Handler: s.handler(), ReadHeaderTimeout: o.ReadTimeout, IdleTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return reqCtx },
		ErrorLog:    log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	var serveLn net.Listener = newLimitListener(ln, o.MaxConns)
	if atls != nil {
		d.scheme = "https"
		serveLn = tls.NewListener(serveLn, atls)
	}
	go func() {
		if err := d.srv.Serve(serveLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http", "error", err)
		}
	}()
	log.Info("started", "member", o.ID, "raft", ctl.Node().Addr(), "api", d.scheme+"://"+ln.Addr().String(),
		"console", d.scheme+"://"+consoleHost(ln.Addr())+"/console/",
		"peers", len(members), "cluster_tls", ctls != nil, "api_tls", atls != nil, "workers", o.Workers)
	return d, nil
}

// URL is the API's base URL.
func (d *daemon) URL() string { return d.scheme + "://" + d.ln.Addr().String() }

// shutdown stops the workers (running handlers are canceled and their jobs
// naked or left to their lease), then the HTTP server (open watch streams
// are ended), then the member. grace bounds each phase.
func (d *daemon) shutdown(grace time.Duration) error {
	d.stopWork()
	waitGroup(&d.workers, grace)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	d.stopReqs()
	httpErr := d.srv.Shutdown(ctx)
	d.stopBg()
	err := d.ctl.Close(ctx)
	waitGroup(&d.bg, grace)
	d.unlock()
	return errors.Join(httpErr, err)
}

func waitGroup(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// countRefusals counts the node's persist-guard refusals, and closes
// removed when the member learns it was removed from the cluster.
func countRefusals(ctx context.Context, ctl *jobraft.Controller, m *metrics, removed chan struct{}) {
	evs, cancel := ctl.Node().Events(64)
	defer cancel()
	once := false
	remove := func() {
		if !once {
			once = true
			close(removed)
		}
	}
	if ctl.Node().Status().Removed != nil {
		remove() // learnt before the subscription
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-evs:
			if !ok {
				return
			}
			if ev.Kind == raft.EventRemoved {
				remove()
			}
			if ev.Kind == raft.EventGuardRefusal {
				kind := wal.RefusalKind(ev.Err)
				if kind == "" {
					kind = "other"
				}
				m.refusals.WithLabelValues(kind).Inc()
			}
		}
	}
}

// countExpiries counts lease expiries from the watch stream, resuming
// after compaction.
func countExpiries(ctx context.Context, ctl *jobraft.Controller, m *metrics, log hclog.Logger) {
	var from uint64
	for ctx.Err() == nil {
		evs, err := ctl.Watch(ctx, from, jobraft.WatchFilter{Kinds: []jobraft.EventKind{jobraft.EventExpired}})
		var ce *jobraft.CompactedError
		if errors.As(err, &ce) {
			from = ce.Oldest
			continue
		}
		if err != nil {
			return
		}
		for ev := range evs {
			switch {
			case ev.Kind == jobraft.EventExpired:
				m.expiries.Inc()
				from = ev.Index + 1
			case errors.As(ev.Err, &ce):
				log.Debug("expiry watch compacted; resuming", "oldest", ce.Oldest)
				from = ce.Oldest
			}
		}
	}
}
