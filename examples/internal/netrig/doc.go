//go:build linux

// Package netrig places cluster members on separate hosts on one Linux
// machine: each member gets its own network namespace and address, and
// every link between two members runs through a TCP fault proxy
// (Toxiproxy, github.com/Shopify/toxiproxy/v2, used as a library by the
// netproxy command) that adds latency and jitter, caps bandwidth, resets
// connections, and cuts a link one way or a member off entirely. Nothing
// leaves the machine.
//
// # Topology
//
// A rig takes a slot S (1..250) and builds, for members m = 0..n-1:
//
//   - a hub namespace with a bridge, and one veth from this machine's
//     namespace into it (jrs<S>, address 198.18.S.254/24): the only thing
//     the rig adds outside its namespaces, so this process reaches every
//     member's API directly (no proxy on that path);
//   - a namespace per member with a veth on the bridge holding its address
//     Addr(m) = 198.18.S.(m+1) and a second one, 198.19.S.(m+1);
//   - in member m's namespace, every peer k's Addr(k) as an alias on the
//     loopback, where m's netproxy listens on k's raft port: m dials
//     k's advertised address and reaches its own proxy for the link m→k,
//     which forwards to k's second address. Member k listens for raft on
//     every address of its namespace.
//
// A member's certificate names its own address, as on separate hosts; all
// members see the same -peers list. The proxies' HTTP API listens on each
// member's address, port 9000.
//
// # Faults
//
// Latency (microsecond resolution: netproxy's "delay" toxic), Bandwidth,
// Resets (Toxiproxy's reset_peer), Cut (one way: Toxiproxy's timeout toxic
// with no timeout drops the bytes and holds the connection open, as a black
// hole does), Isolate (every link of a member, both ways) and Heal (removes
// cuts and resets; Toxiproxy then closes the connections that lost bytes,
// as TCP would give up on them). The kernel's netem qdisc is not used: the
// machines this runs on (CI, this repository's VM) lack sch_netem, and a
// proxy applies the same faults to every link from one place.
//
// # Cleanup
//
// Close kills what runs in the rig's namespaces and deletes them; New first
// sweeps namespaces of rigs whose process died before its Close (names
// jobraft-<slot>-<pid>-hub and -n<m>). The rig needs root and ip(8)
// (Debian: iproute2); elsewhere New returns ErrUnsupported.
package netrig
