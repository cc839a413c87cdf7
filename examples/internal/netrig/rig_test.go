//go:build linux

package netrig_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobraft/jobraft/examples/internal/netrig"
	"github.com/jobraft/jobraft/examples/internal/netrig/netrigtest"
)

// echo serves member m's raft port in its namespace: it writes back
// whatever it reads and reports every read on got.
func echo(t *testing.T, r *netrig.Rig, m int) <-chan []byte {
	t.Helper()
	l, err := r.Listen(m, r.RaftListen(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan []byte, 1024)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						got <- slices.Clone(buf[:n])
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return got
}

// dial opens a connection from member from to member to's raft address
// (through from's proxy for to).
func dial(t *testing.T, r *netrig.Rig, from, to int) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := r.Dial(ctx, from, r.RaftAddr(to))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes 64 bytes and reads them back (within d) and returns
// how long that took.
func roundTrip(c net.Conn, d time.Duration) (time.Duration, error) {
	msg := make([]byte, 64)
	t0 := time.Now()
	_ = c.SetDeadline(t0.Add(d))
	if _, err := c.Write(msg); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, msg); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// rtts measures n round trips from member 0 to 1.
func rtts(t *testing.T, r *netrig.Rig, n int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := r.Ping(ctx, 0, 1, n)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLatencyIsApplied: the round trip between two members' namespaces,
// through the proxy, takes the rig's latency: never less than the round
// trip less its jitter; the fastest of 30 within 1 ms and a quarter above
// it (a 0.2 ms round trip must not take a millisecond timer's 2.4 ms), the
// median within 10 ms (a loaded machine stalls the proxies).
func TestLatencyIsApplied(t *testing.T) {
	r := netrigtest.New(t, 2)
	base := rtts(t, r, 30)
	t.Logf("no latency: min %v, median %v", base[0], base[len(base)/2])
	for _, rtt := range []time.Duration{200 * time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond} {
		jitter := rtt / 10
		if err := r.Latency(rtt, jitter); err != nil {
			t.Fatal(err)
		}
		got := rtts(t, r, 30)
		lo, med := got[0], got[len(got)/2]
		t.Logf("latency %v ± %v: min %v, median %v, max %v", rtt, jitter, lo, med, got[len(got)-1])
		if lo < rtt-jitter {
			t.Errorf("rtt %v ± %v: a round trip took %v, less than the latency allows", rtt, jitter, lo)
		}
		if bound := rtt + jitter + time.Millisecond + rtt/4; lo > bound {
			t.Errorf("rtt %v ± %v: the fastest round trip took %v, above %v", rtt, jitter, lo, bound)
		}
		if med > rtt+jitter+10*time.Millisecond {
			t.Errorf("rtt %v ± %v: median round trip %v, over 10 ms above it", rtt, jitter, med)
		}
	}
	if err := r.Latency(0, 0); err != nil {
		t.Fatal(err)
	}
	if got := rtts(t, r, 30); got[len(got)/2] >= 2*time.Millisecond-200*time.Microsecond {
		t.Errorf("latency removed, yet the median round trip is %v", got[len(got)/2])
	}
}

// silent fails t if anything arrives on got within d.
func silent(t *testing.T, got <-chan []byte, d time.Duration, what string) {
	t.Helper()
	select {
	case b := <-got:
		t.Errorf("%s: %d bytes arrived", what, len(b))
	case <-time.After(d):
	}
}

// arrives fails t unless something arrives on got within 10 s.
func arrives(t *testing.T, got <-chan []byte, what string) {
	t.Helper()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Errorf("%s: nothing arrived within 10s", what)
	}
}

func send(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
}

func drain(ch <-chan []byte) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestPartitionCuts: a one-way cut drops what one member sends the other
// and nothing the other sends back; isolating a member cuts all its links
// both ways; Heal restores them, and closes the connections that lost
// bytes.
func TestPartitionCuts(t *testing.T) {
	r := netrigtest.New(t, 3)
	got := []<-chan []byte{echo(t, r, 0), echo(t, r, 1), echo(t, r, 2)}
	if _, err := roundTrip(dial(t, r, 0, 1), 10*time.Second); err != nil {
		t.Fatalf("before any cut: %v", err)
	}
	drain(got[1])

	if err := r.Cut(0, 1); err != nil {
		t.Fatal(err)
	}
	c01 := dial(t, r, 0, 1)
	send(t, c01)
	silent(t, got[1], time.Second, "cut 0→1: member 0 sent to 1")
	c10 := dial(t, r, 1, 0)
	send(t, c10)
	arrives(t, got[0], "cut 0→1: member 1 sent to 0")
	_ = c10.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c10.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("cut 0→1: member 0's reply reached 1 (%d bytes, %v)", n, err)
	}
	if _, err := roundTrip(dial(t, r, 1, 2), 10*time.Second); err != nil {
		t.Errorf("cut 0→1: the link 1→2 broke too: %v", err)
	}

	if err := r.Isolate(2); err != nil {
		t.Fatal(err)
	}
	drain(got[0])
	drain(got[2])
	send(t, dial(t, r, 2, 0))
	send(t, dial(t, r, 0, 2))
	silent(t, got[0], time.Second, "2 isolated: it sent to 0")
	silent(t, got[2], 0, "2 isolated: 0 sent to it")

	if err := r.Heal(); err != nil {
		t.Fatal(err)
	}
	_ = c01.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c01); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Errorf("healed: the connection that lost bytes was not closed: %v", err)
	}
	for _, l := range [][2]int{{0, 1}, {1, 0}, {2, 0}, {0, 2}} {
		if _, err := roundTrip(dial(t, r, l[0], l[1]), 10*time.Second); err != nil {
			t.Errorf("healed: %d→%d: %v", l[0], l[1], err)
		}
	}
}

// TestBandwidthIsCapped: 256 KB through a link capped at 128 KB/s in each
// direction take at least a second and a half.
func TestBandwidthIsCapped(t *testing.T) {
	r := netrigtest.New(t, 2)
	echo(t, r, 1)
	if err := r.Bandwidth(128); err != nil {
		t.Fatal(err)
	}
	c := dial(t, r, 0, 1)
	const size = 256 << 10
	t0 := time.Now()
	go func() { _, _ = c.Write(make([]byte, size)) }()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	t.Logf("%d KB echoed at 128 KB/s in %v", size>>10, took)
	if took < 1500*time.Millisecond {
		t.Errorf("256 KB echoed in %v through a 128 KB/s cap", took)
	}
}

// TestResetsEndConnections: with resets on a link, a connection on it is
// reset soon after its first byte, and one on another link is not.
func TestResetsEndConnections(t *testing.T) {
	r := netrigtest.New(t, 3)
	echo(t, r, 1)
	echo(t, r, 2)
	if err := r.Resets(netrig.Link{From: 0, To: 1}, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c := dial(t, r, 0, 1)
	send(t, c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("connection on the resetting link: %v, want it reset", err)
	}
	other := dial(t, r, 0, 2)
	for range 5 {
		if _, err := roundTrip(other, 10*time.Second); err != nil {
			t.Fatalf("link 0→2 without resets: %v", err)
		}
	}
}

// TestCloseLeavesNoNamespace: Close removes every namespace of the rig and
// its link in this namespace.
func TestCloseLeavesNoNamespace(t *testing.T) {
	netrigtest.Require(t)
	r, err := netrig.New(context.Background(), netrig.Options{Members: 3, Dir: t.TempDir(), Proxy: netrigtest.Proxy(t)})
	if err != nil {
		t.Fatal(err)
	}
	mine := func() []string {
		left, err := netrig.Leftovers()
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(left, func(ns string) bool { return !strings.HasPrefix(ns, r.Prefix()) })
	}
	if got := mine(); len(got) != 4 {
		t.Fatalf("rig namespaces %v, want a hub and 3 members", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mine(); len(got) != 0 {
		t.Fatalf("after Close: %v left", got)
	}
	if link := "jrs" + strings.Split(r.Prefix(), "-")[1]; linkExists(link) {
		t.Fatalf("after Close: link %s left", link)
	}
}

// TestSweepRemovesADeadRig: a rig whose process was SIGKILLed (no Close
// ran) is removed by the next New, its processes with it.
func TestSweepRemovesADeadRig(t *testing.T) {
	if os.Getenv("NETRIG_CHILD_DIR") != "" {
		rigChild()
		return
	}
	netrigtest.Require(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSweepRemovesADeadRig$")
	cmd.Env = append(os.Environ(), "NETRIG_CHILD_DIR="+t.TempDir(), "NETRIG_CHILD_PROXY="+netrigtest.Proxy(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 256)
	n, err := io.ReadAtLeast(out, line, 1)
	prefix := strings.TrimSpace(string(line[:n]))
	if err != nil || !strings.HasPrefix(prefix, "jobraft-") {
		_ = cmd.Process.Kill()
		t.Fatalf("child rig: %q, %v", prefix, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := netrig.Sweep(); err != nil {
		t.Fatal(err)
	}
	left, err := netrig.Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range left {
		if strings.HasPrefix(ns, prefix) {
			t.Errorf("namespace %s of the killed rig left after Sweep", ns)
		}
	}
	if link := "jrs" + strings.Split(prefix, "-")[1]; linkExists(link) {
		t.Errorf("link %s of the killed rig left after Sweep", link)
	}
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// rigChild builds a rig, prints its prefix and waits to be killed.
func rigChild() {
	r, err := netrig.New(context.Background(), netrig.Options{Members: 2, Dir: os.Getenv("NETRIG_CHILD_DIR"), Proxy: os.Getenv("NETRIG_CHILD_PROXY")})
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString(r.Prefix() + "\n")
	select {}
}
