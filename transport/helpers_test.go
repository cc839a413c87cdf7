package transport

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/test/stalltest"
)

// logSink collects log lines; tests dump it on failure and may look for a
// logged refusal reason (the reason is part of the contract: a refused
// connection is logged).
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *logSink) contains(sub string) bool { return strings.Contains(s.String(), sub) }

func testLogger(t *testing.T, name string) (hclog.Logger, *logSink) {
	t.Helper()
	sink := &logSink{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of %s:\n%s", name, sink.String())
		}
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: sink, Level: hclog.Debug}), sink
}

// waitFor polls cond until it holds or timeout elapses.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	w := stalltest.Start() // timeout is a liveness bound, widened by measured stalls
	for !cond() {
		if w.Exceeded(timeout) {
			t.Fatalf("timed out after %s waiting for %s", w.Report(timeout), what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newTestMux listens on loopback with cfg (BindAddr defaulted) and closes
// the mux at cleanup.
func newTestMux(t *testing.T, name string, cfg Config) (*Mux, *logSink) {
	t.Helper()
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1:0"
	}
	var sink *logSink
	if cfg.Logger == nil {
		cfg.Logger, sink = testLogger(t, name)
	}
	m, err := Listen(cfg)
	if err != nil {
		t.Fatalf("Listen(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, sink
}
