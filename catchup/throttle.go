package catchup

import (
	"sync"
	"time"
)

// DefaultMaxStreamBytesPerSecond is the default bound on the bytes per
// second the leader streams to members catching up (a quarter of a
// gigabit link): a 77 MB snapshot takes about 2.3 s at it.
const DefaultMaxStreamBytesPerSecond = 32 << 20

// Throttle is a token bucket over bytes: what the leader streams to
// members catching up (snapshot chunks, appends to a non-voter behind) is
// charged to it, and a sender waits as long as Reserve says before it
// sends. It is shared by every catching-up member, so the bound holds for
// the leader as a whole. It holds no clock: callers pass now. Safe for
// concurrent use. A nil *Throttle never waits (unlimited).
type Throttle struct {
	rate  float64 // bytes per second
	burst float64 // bytes the bucket holds when full

	mu     sync.Mutex
	tokens float64 // may go negative: a debt the next senders wait off
	at     time.Time
}

// NewThrottle returns a throttle of bytesPerSecond, or nil (unlimited)
// when bytesPerSecond <= 0. Its burst is an eighth of a second's worth,
// at least 64 KiB.
func NewThrottle(bytesPerSecond int64) *Throttle {
	if bytesPerSecond <= 0 {
		return nil
	}
	r := float64(bytesPerSecond)
	return &Throttle{rate: r, burst: max(r/8, 64<<10), tokens: max(r/8, 64<<10)}
}

// Reserve charges n bytes sent at now and returns how long the sender
// waits before it sends them (0: at once). Reservations queue: each one
// is charged in full, so senders together never pass the rate over any
// stretch longer than the burst.
func (t *Throttle) Reserve(now time.Time, n int) time.Duration {
	if t == nil || n <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.at.IsZero() && now.After(t.at) {
		t.tokens = min(t.tokens+now.Sub(t.at).Seconds()*t.rate, t.burst)
	}
	if now.After(t.at) {
		t.at = now
	}
	t.tokens -= float64(n)
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(-t.tokens / t.rate * float64(time.Second))
}
