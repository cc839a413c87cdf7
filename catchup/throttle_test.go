package catchup

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	var none *Throttle
	if w := none.Reserve(time.Unix(0, 0), 1<<30); w != 0 {
		t.Fatalf("nil throttle waits %v", w)
	}
	if NewThrottle(0) != nil || NewThrottle(-1) != nil {
		t.Fatal("a rate <= 0 is unlimited (nil)")
	}
	const rate = 1 << 20 // 1 MiB/s: burst 128 KiB
	th := NewThrottle(rate)
	t0 := time.Unix(1000, 0)
	// The burst goes at once; a heartbeat (0 bytes) never waits.
	if w := th.Reserve(t0, 128<<10); w != 0 {
		t.Fatalf("burst waits %v", w)
	}
	if w := th.Reserve(t0, 0); w != 0 {
		t.Fatalf("empty send waits %v", w)
	}
	// Past the burst a sender waits the debt off at the rate.
	if w := th.Reserve(t0, 512<<10); w != 500*time.Millisecond {
		t.Fatalf("512 KiB past the burst waits %v, want 500ms", w)
	}
	// A second sender queues behind the first.
	if w := th.Reserve(t0, 256<<10); w != 750*time.Millisecond {
		t.Fatalf("queued sender waits %v, want 750ms", w)
	}
	// Time pays the debt back.
	if w := th.Reserve(t0.Add(750*time.Millisecond), 0); w != 0 {
		t.Fatalf("empty send waits %v", w)
	}
	if w := th.Reserve(t0.Add(750*time.Millisecond), 1<<10); w != time.Second/1024 {
		t.Fatalf("after the debt is paid 1 KiB waits %v, want %v", w, time.Second/1024)
	}
	// An idle bucket refills to its burst, not past it.
	t1 := t0.Add(time.Hour)
	if w := th.Reserve(t1, 128<<10); w != 0 {
		t.Fatalf("refilled burst waits %v", w)
	}
	if w := th.Reserve(t1, 1<<20); w != time.Second {
		t.Fatalf("1 MiB past a full burst waits %v, want 1s", w)
	}
	// A clock going back changes nothing (no refill, no panic).
	if w := th.Reserve(t1.Add(-time.Minute), 0); w != 0 {
		t.Fatalf("empty send waits %v", w)
	}
	// Over a long stream the bytes sent in [0, T] stay within rate*T + burst.
	th = NewThrottle(rate)
	now, sent := t0, 0
	for i := 0; i < 1000; i++ {
		now = now.Add(th.Reserve(now, 32<<10)) // sender waits, then sends
		sent += 32 << 10
		if limit := now.Sub(t0).Seconds()*rate + 128<<10 + 32<<10; float64(sent) > limit {
			t.Fatalf("after %v sent %d > %.0f", now.Sub(t0), sent, limit)
		}
	}
	if got := float64(sent) / now.Sub(t0).Seconds(); got > rate*1.01 || got < rate*0.95 {
		t.Fatalf("long stream at %.0f B/s, want about %d", got, rate)
	}
}
