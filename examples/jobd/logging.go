package main

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// logFilter drops what a graceful shutdown makes hashicorp/raft's
// NetworkTransport log as errors: when the member closes its own listener
// and connections, the transport's connection handlers report "failed to
// decode incoming command" (or "failed to flush response") with "use of
// closed network connection". Only those two messages, only with that
// error, and only once shutdown has begun are dropped; the same message
// with any other error, or before shutdown, is logged.
type logFilter struct {
	stopping atomic.Bool
}

// shuttingDown marks the start of a graceful shutdown.
func (f *logFilter) shuttingDown() { f.stopping.Store(true) }

func (f *logFilter) exclude(level hclog.Level, msg string, args ...any) bool {
	if !f.stopping.Load() || level != hclog.Error {
		return false
	}
	if msg != "failed to decode incoming command" && msg != "failed to flush response" {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "error" {
			err, _ := args[i+1].(error)
			return err != nil && closedConn(err)
		}
	}
	return false
}

// closedConn: the error of an operation on a connection this process
// closed. The msgpack decoder may wrap it without Unwrap, hence the text.
func closedConn(err error) bool {
	return errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "use of closed network connection")
}

// newLogger is jobd's logger and the filter its shutdown turns on.
func newLogger(level string, out io.Writer) (hclog.Logger, *logFilter) {
	f := &logFilter{}
	log := hclog.New(&hclog.LoggerOptions{Name: "jobd", Level: hclog.LevelFromString(level), Output: out, Exclude: f.exclude})
	return log, f
}
