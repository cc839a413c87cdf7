// Command embed3 embeds a 3-member jobraft cluster: each member is the
// same program with its own ID, data dir and address, listing all three.
//
// One member per process (on three machines, or three terminals):
//
//	embed3 -id n1 -data /var/lib/app/n1 -peers n1=10.0.0.1:7400,n2=10.0.0.2:7400,n3=10.0.0.3:7400
//	embed3 -id n2 -data /var/lib/app/n2 -peers n1=10.0.0.1:7400,n2=10.0.0.2:7400,n3=10.0.0.3:7400
//	embed3 -id n3 -data /var/lib/app/n3 -peers n1=10.0.0.1:7400,n2=10.0.0.2:7400,n3=10.0.0.3:7400
//
// Without -id, it runs all three members in this one process on loopback,
// submits a job on one member and reads its result on another (what
// main_test.go runs). Across machines, give the members mutual TLS
// (raft.Config.TLS): a non-loopback address without it is refused.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/raft"
)

func main() {
	id := flag.String("id", "", "this member's ID (empty: run all three members here, on loopback)")
	data := flag.String("data", "", "this member's data dir")
	peers := flag.String("peers", "", "all members, id=host:port,... (the same on every member)")
	flag.Parse()
	if *id == "" {
		dir, err := os.MkdirTemp("", "jobraft-embed3-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		out, err := runLocal(context.Background(), dir)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out)
		return
	}
	members, err := parsePeers(*peers)
	if err != nil || *data == "" {
		log.Fatalf("embed3: -data and -peers id=host:port,... are required (%v)", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctl, err := openMember(ctx, *id, *data, members)
	if err != nil {
		log.Fatal(err)
	}
	defer ctl.Close(context.Background())
	go ctl.Run(ctx, workers()) // every member runs workers
	<-ctx.Done()
}

// openMember opens one member. Every member lists every member (itself
// included) and bootstraps: the first start of a fresh cluster forms it,
// later starts find their state in the data dir.
func openMember(ctx context.Context, id, dir string, members []raft.Member) (*jobraft.Controller, error) {
	var self string
	for _, m := range members {
		if m.ID == id {
			self = m.Address
		}
	}
	if self == "" {
		return nil, fmt.Errorf("-peers does not list member %q", id)
	}
	return jobraft.Open(ctx, jobraft.Config{
		Config: raft.Config{
			ID: id, DataDir: dir, BindAddr: self, Bootstrap: true, InitialMembers: members,
			// TLS: mutual TLS between members, required off loopback.
		},
		LeaseTTL: 30 * time.Second,
	})
}

// workers is the worker configuration every member runs. Handlers must be
// idempotent: a job runs at least once.
func workers() jobraft.WorkerConfig {
	return jobraft.WorkerConfig{
		Queues: map[string]int{"emails": 4},
		Handlers: map[string]jobraft.Handler{
			"upper": func(ctx context.Context, job jobraft.Job) ([]byte, error) {
				return []byte(strings.ToUpper(string(job.Payload))), nil
			},
		},
	}
}

// runLocal runs three members in this process on loopback, submits a job
// on the third and waits for its outcome on the first.
func runLocal(ctx context.Context, dir string) (string, error) {
	var members []raft.Member
	for i := 1; i <= 3; i++ {
		addr, err := freeAddr()
		if err != nil {
			return "", err
		}
		members = append(members, raft.Member{ID: fmt.Sprintf("n%d", i), Address: addr, Voter: true})
	}
	var ctls []*jobraft.Controller
	defer func() {
		for _, c := range ctls {
			c.Close(context.Background())
		}
	}()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, m := range members {
		ctl, err := openMember(ctx, m.ID, filepath.Join(dir, m.ID), members)
		if err != nil {
			return "", err
		}
		ctls = append(ctls, ctl)
		go ctl.Run(wctx, workers())
	}

	// Submit on any member (a follower forwards to the leader); the ID
	// makes retries exactly-once.
	var job jobraft.Submitted
	var err error
	for {
		job, err = ctls[2].Submit(ctx, jobraft.SubmitRequest{ID: "welcome-42", Queue: "emails", Kind: "upper", Payload: []byte("hello")})
		if err == nil || ctx.Err() != nil {
			break
		}
		// No leader yet (the cluster is electing one), or an unknown
		// outcome: the same ID again is safe either way.
		if !errors.Is(err, jobraft.ErrNotSubmitted) && !errors.Is(err, jobraft.ErrMayExist) {
			return "", err
		}
		select { // retry pacing
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return "", err
	}
	// Read the outcome on another member.
	done, err := ctls[0].Wait(ctx, job.ID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: %s (submitted on %s, read on %s)", done.ID, done.State, done.Result, members[2].ID, members[0].ID), nil
}

func parsePeers(s string) ([]raft.Member, error) {
	var out []raft.Member
	for _, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%q is not id=host:port", p)
		}
		out = append(out, raft.Member{ID: id, Address: addr, Voter: true})
	}
	return out, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
