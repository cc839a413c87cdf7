package clustertest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FreeAddr hands out distinct ports below the ephemeral range, each
// reserved: a port whose lock another holder has is never handed out.
func TestFreeAddrReservesPortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := reservedRange()
	if hi <= lo {
		t.Skipf("no port range below the ephemeral one here (%d..%d): FreeAddr falls back to kernel ports", lo, hi)
	}
	seen := map[string]bool{}
	for range 200 {
		addr := FreeAddr(t)
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < lo || port >= hi {
			t.Fatalf("port %d outside [%d, %d)", port, lo, hi)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
	}
	// Another holder (another open file description: flock conflicts
	// across them as across processes) keeps the port from us.
	port := lo + 7
	for reservedHas(port) {
		port++
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "jobraft-test-ports", strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !lockFile(f) {
		t.Skipf("port %d is reserved by another process right now", port)
	}
	if reserve(port) {
		t.Fatalf("port %d reserved although another holder has its lock", port)
	}
}

func reservedHas(port int) bool {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	return reserved[port] != nil
}
