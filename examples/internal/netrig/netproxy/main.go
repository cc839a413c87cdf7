//go:build linux

// Command netproxy is the netns rig's fault proxy for one member's network
// namespace: Toxiproxy (github.com/Shopify/toxiproxy/v2, as a library) with
// one proxy per link out of the member, each listening on a peer's
// advertised address (an alias on this namespace's loopback) and
// forwarding to the peer's second address, and Toxiproxy's HTTP API, which
// the rig sets faults through. It adds one toxic to Toxiproxy's set:
// "delay", a latency with microsecond resolution (delay.go).
//
//	netproxy -api 198.18.7.1:9000 -link n1-n2=198.18.7.2:7002=198.19.7.2:7002 ...
//
// It runs until killed; a link whose address cannot be listened on exits
// it with status 1 before the API is served.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// links is the repeatable -link name=listen=upstream.
type links [][3]string

func (l *links) String() string { return fmt.Sprint(*l) }

func (l *links) Set(v string) error {
	p := strings.Split(v, "=")
	if len(p) != 3 || p[0] == "" || p[1] == "" || p[2] == "" {
		return fmt.Errorf("-link %q: want name=listen=upstream", v)
	}
	*l = append(*l, [3]string{p[0], p[1], p[2]})
	return nil
}

func main() {
	api := flag.String("api", "", "host:port of Toxiproxy's HTTP API (required)")
	var ls links
	flag.Var(&ls, "link", "a proxy: name=listen=upstream (repeatable)")
	flag.Parse()
	if err := run(*api, ls); err != nil {
		fmt.Fprintln(os.Stderr, "netproxy:", err)
		os.Exit(1)
	}
}

func run(api string, ls links) error {
	host, port, err := net.SplitHostPort(api)
	if err != nil {
		return fmt.Errorf("-api %q: %w", api, err)
	}
	logger := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	for _, l := range ls {
		if err := srv.Collection.Add(toxiproxy.NewProxy(srv, l[0], l[1], l[2]), true); err != nil {
			return fmt.Errorf("link %s (listen %s): %w", l[0], l[1], err)
		}
	}
	srv.Listen(host, port) // returns only by exiting the process
	return nil
}
