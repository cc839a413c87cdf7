package faultnet

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/transport"
)

// logSink collects log lines; tests dump it on failure.
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

// newTestMux listens on loopback and closes the mux at cleanup.
func newTestMux(t *testing.T, name string) *transport.Mux {
	t.Helper()
	logger, _ := testLogger(t, name)
	m, err := transport.Listen(transport.Config{BindAddr: "127.0.0.1:0", Logger: logger})
	if err != nil {
		t.Fatalf("Listen(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}
