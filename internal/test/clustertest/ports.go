package clustertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address for a member to listen on, one no
// other process can be handed while this test process runs: a member that
// is killed and restarted must bind the same address again (its peers know
// it), and so must nothing else in between.
//
// A port the kernel assigns (":0") is from the ephemeral range, where any
// outgoing connection of any process may take it as its source port while
// the member is down (a chaos soak run saw a restarted member fail with
// "address already in use" after 5 s of retries). So FreeAddr picks ports
// below the ephemeral range, which the kernel never hands out by itself,
// and reserves each one across processes with a lock file held until this
// process exits (parallel test binaries of `go test ./...` share the
// range). It falls back to a kernel-assigned port, never handed out twice
// in this process, only when no such range exists.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := ReserveAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// ReserveAddr is FreeAddr for a caller without a test (a harness that a
// program such as the demo also runs): the same reservation, an error
// instead of a failed test.
func ReserveAddr() (string, error) {
	lo, hi := reservedRange()
	for attempt := 0; hi > lo && attempt < 1000; attempt++ {
		port := lo + rand.IntN(hi-lo)
		if !reserve(port) {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use by someone who did not reserve it: keep the reservation, skip the port
		}
		ln.Close()
		return addr, nil
	}
	return kernelAddr()
}

const lowestPort = 20000

// reservedRange is [20000, the lowest ephemeral port), empty when the
// ephemeral range starts lower or cannot be read.
func reservedRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	eph, err := strconv.Atoi(f[0])
	if err != nil || eph <= lowestPort+1000 {
		return 0, 0
	}
	return lowestPort, eph
}

var (
	reservedMu sync.Mutex
	reserved   = map[int]*os.File{} // held open (and locked) until the process exits
	handed     = map[string]bool{}
)

// reserve takes port's lock file in the system temp dir; false if another
// process holds it or this one already handed the port out.
func reserve(port int) bool {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	if reserved[port] != nil {
		return false
	}
	dir := filepath.Join(os.TempDir(), "jobraft-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if !lockFile(f) {
		f.Close()
		return false
	}
	reserved[port] = f
	return true
}

// kernelAddr is a kernel-assigned loopback port never returned before in
// this process.
func kernelAddr() (string, error) {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("clustertest: no free port: %w", err)
		}
		addr := ln.Addr().String()
		ln.Close()
		reservedMu.Lock()
		seen := handed[addr]
		handed[addr] = true
		reservedMu.Unlock()
		if !seen {
			return addr, nil
		}
	}
}
