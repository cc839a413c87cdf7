package walcompare_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/jobraft/jobraft/transport"
	"github.com/jobraft/jobraft/walcompare"
)

// TestDialErrorNamesMemberOnce: a live member that refuses the connection
// is named once, "name (address)": the transport's error under it does not
// repeat the address.
func TestDialErrorNamesMemberOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = walcompare.Dial(context.Background(), "m2", addr, nil)
	if err == nil {
		t.Fatalf("dial %s succeeded", addr)
	}
	if n := strings.Count(err.Error(), addr); n != 1 || !strings.Contains(err.Error(), "m2 ("+addr+")") {
		t.Fatalf("error names %s %d times, want once as m2 (%s): %v", addr, n, addr, err)
	}
	var ce *transport.CallError
	if !errors.As(err, &ce) || !errors.Is(err, transport.ErrNotDelivered) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v lost its cause", err)
	}
}
