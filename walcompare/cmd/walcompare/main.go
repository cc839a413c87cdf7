// Command walcompare compares raft members' logs index by index and proves
// that no committed index differs between them.
//
//	walcompare [--committed N] [--json] [--from I] [--to J]
//	           [--tls-ca FILE --tls-cert FILE --tls-key FILE] DIR|ADDR ...
//
// Each argument is a member: a data dir (a wal log dir, a raft.Node data dir
// holding log/, or a raft-boltdb file or a dir holding one), opened
// read-only, or the host:port of a running member, compared over its RPC
// channel without stopping it. Members are named by the argument's base
// name (or address).
//
// --from I and --to J are the first and last index to compare, both
// included (0: unbounded). Every range the report prints is half-open,
// [start,end): the compared range, the runs of missing or compacted indexes
// and the ranges in the proof.
//
// Exit status: 0 when there is no committed divergence, 1 when there is at
// least one, 2 on errors (bad arguments, an unreadable dir, an unreachable
// member).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/jobraft/jobraft/walcompare"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("walcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	committed := fs.Uint64("committed", 0, "committed boundary to use as given (default: the highest persisted commit floor)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	from := fs.Uint64("from", 0, "first index to compare, included (0: the start)")
	to := fs.Uint64("to", 0, "last index to compare, included (0: the end)")
	stream := fs.Bool("stream", false, "read live members entry by entry instead of by digests")
	ca := fs.String("tls-ca", "", "cluster CA (PEM) for live members")
	cert := fs.String("tls-cert", "", "client certificate (PEM) for live members")
	key := fs.String("tls-key", "", "client key (PEM) for live members")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: walcompare [flags] DIR|ADDR ...\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *to != 0 && *to < *from {
		fmt.Fprintf(stderr, "walcompare: --to %d is below --from %d\n", *to, *from)
		return 2
	}
	tlsConfig, err := clientTLS(*ca, *cert, *key)
	if err != nil {
		fmt.Fprintf(stderr, "walcompare: %v\n", err)
		return 2
	}
	var members []walcompare.Member
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for _, arg := range fs.Args() {
		var m walcompare.Member
		if walcompare.IsAddr(arg) {
			m, err = walcompare.Dial(ctx, arg, arg, tlsConfig)
		} else {
			m, err = walcompare.OpenDir(filepath.Base(filepath.Clean(arg)), arg)
		}
		if err != nil {
			fmt.Fprintf(stderr, "walcompare: %v\n", err)
			return 2
		}
		members = append(members, m)
	}
	r, err := walcompare.Compare(ctx, members, walcompare.Options{Committed: *committed, From: *from, To: *to, Stream: *stream})
	if err != nil {
		fmt.Fprintf(stderr, "walcompare: %v\n", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "walcompare: %v\n", err)
		return 2
	}
	if r.CommittedCount > 0 {
		return 1
	}
	return 0
}

func clientTLS(ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	if ca == "" || cert == "" || key == "" {
		return nil, errors.New("--tls-ca, --tls-cert and --tls-key go together")
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", ca)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
