package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/fsm"
	"github.com/jobraft/jobraft/internal/watchlog"
)

var errGone = errors.New("gone")

// fakeLease counts a lease's calls; extendErr is what Extend answers.
type fakeLease struct {
	mu        sync.Mutex
	extends   int
	acks      int
	afterAck  int // extends that started after the ack
	extendErr error
	extended  chan struct{} // receives after each extend
}

func (l *fakeLease) Extend(context.Context) error {
	l.mu.Lock()
	l.extends++
	if l.acks > 0 {
		l.afterAck++
	}
	err := l.extendErr
	l.mu.Unlock()
	select {
	case l.extended <- struct{}{}:
	default:
	}
	return err
}

func (l *fakeLease) Ack(context.Context, []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks++
	return nil
}
func (l *fakeLease) Nak(context.Context, time.Duration, string) error { return nil }
func (l *fakeLease) Term(context.Context, string) error               { return nil }

// startRunner runs the runner on cfg, its one claim answering one job
// leased by l (then nothing), and returns the func that stops it and
// waits until it returned.
func startRunner(t *testing.T, l *fakeLease, cfg Config) (stop func()) {
	t.Helper()
	claims, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	given := false
	m := &Member{
		Claim: func(cctx context.Context, _ Claim) ([]Claimed, error) {
			if given {
				<-cctx.Done()
				return nil, cctx.Err()
			}
			given = true
			return []Claimed{{Job: fsm.Job{ID: "j", Queue: "q", Kind: "k"}, Token: 7, Lease: l}}, nil
		},
		Gone:       func(err error) bool { return errors.Is(err, errGone) },
		Rec:        watchlog.New(100, 1<<20),
		Closed:     make(chan struct{}),
		RetryPause: time.Millisecond, ReportTimeout: time.Second, Log: hclog.NewNullLogger(),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, m, &cfg, claims)
	}()
	return func() {
		cancel()
		<-done
	}
}

// reported returns a channel closed once the lease was acked (polled with
// a deadline).
func (l *fakeLease) reported(t *testing.T) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			l.mu.Lock()
			n := l.acks
			l.mu.Unlock()
			if n > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}

// The runner extends a running job's lease every TTL/3 while its handler
// runs, and not after: no extend starts once the handler returned and its
// ack was sent.
func TestRunExtendsWhileTheHandlerRuns(t *testing.T) {
	l := &fakeLease{extended: make(chan struct{}, 1)}
	var handlerErr error
	h := func(ctx context.Context, _ fsm.Job) ([]byte, error) {
		for range 3 {
			select {
			case <-l.extended:
			case <-time.After(10 * time.Second): // far beyond TTL/3 = 20 ms
				handlerErr = errors.New("no extend within 10 s")
				return nil, handlerErr
			}
		}
		return nil, ctx.Err()
	}
	stop := startRunner(t, l, Config{Worker: "w", Queues: map[string]int{"q": 1}, Default: h, LeaseTTL: 60 * time.Millisecond, PollWait: time.Second})
	<-l.reported(t)
	stop()
	if handlerErr != nil {
		t.Fatal(handlerErr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.extends < 3 || l.acks != 1 || l.afterAck != 0 {
		t.Fatalf("%d extends, %d acks, %d extends after the ack; want >= 3, 1, 0", l.extends, l.acks, l.afterAck)
	}
}

// An extend that finds the lease gone cancels the handler's context with
// ErrLeaseLost, and its result is not reported.
func TestRunLeaseGoneOnExtendStopsTheHandler(t *testing.T) {
	l := &fakeLease{extended: make(chan struct{}, 1), extendErr: errGone}
	cause := make(chan error, 1)
	cfg := Config{Worker: "w", Queues: map[string]int{"q": 1}, LeaseTTL: 30 * time.Millisecond, PollWait: time.Second,
		Default: func(ctx context.Context, _ fsm.Job) ([]byte, error) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return []byte("late"), nil
		}}
	stop := startRunner(t, l, cfg)
	select {
	case err := <-cause:
		if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, errGone) {
			t.Fatalf("handler context ended by %v, want ErrLeaseLost wrapping the extend's error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's context did not end after the lease was found gone")
	}
	stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acks != 0 || l.extends != 1 {
		t.Fatalf("%d acks, %d extends; want the result dropped after one extend", l.acks, l.extends)
	}
}
