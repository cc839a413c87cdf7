package raft

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Some log lines repeat on every replication retry while a follower
// refuses what its leader sends — for ever, for a diverged member. The
// node hands the wal and hashicorp/raft a logger that lets each of them
// through once per window and says how many it held back, so the first
// one is seen at once and the rest do not bury everything else.

// repeatingLines are the lines limited: the follower's refused truncation
// (the wal's and raft's own), its refused snapshot install, and the
// leader's retries towards it.
var repeatingLines = map[string]bool{
	"guard refused DeleteRange":                  true, // wal, follower
	"clearing log suffix":                        true, // hashicorp/raft appendEntries, follower
	"failed to clear log suffix":                 true, // hashicorp/raft appendEntries, follower
	"failed to create snapshot to install":       true, // hashicorp/raft installSnapshot, follower
	"appendEntries rejected, sending older logs": true, // hashicorp/raft replicateTo, leader
	"failed to install snapshot":                 true, // hashicorp/raft sendLatestSnapshot, leader
	"failed to send snapshot to":                 true, // hashicorp/raft replicateTo, leader
	"failed to get log":                          true, // hashicorp/raft setupAppendEntries, leader (compacted: a snapshot follows)
	// A removed member (removed.go) or a non-voter at each heartbeat timeout.
	"not part of stable configuration, aborting election":                                                            true,
	"heartbeat timeout reached, not part of a stable configuration or a non-voter, not triggering a leader election": true,
}

// repeatWindow is one line's state in the limiter.
type repeatWindow struct {
	start time.Time // when the last line let through was logged
	held  int       // lines held back since
}

// admit decides whether a line seen at now is logged: the first one is,
// then one per window, carrying the count of those held back in between.
func (w *repeatWindow) admit(now time.Time, every time.Duration) (ok bool, held int) {
	if !w.start.IsZero() && now.Sub(w.start) < every {
		w.held++
		return false, 0
	}
	held, w.start, w.held = w.held, now, 0
	return true, held
}

// repeatLimiter holds the windows of the limited lines, by logger name and
// message.
type repeatLimiter struct {
	every time.Duration
	now   func() time.Time
	lines map[string]bool

	mu   sync.Mutex
	wins map[string]*repeatWindow
}

func newRepeatLimiter(every time.Duration, now func() time.Time, lines map[string]bool) *repeatLimiter {
	return &repeatLimiter{every: every, now: now, lines: lines, wins: map[string]*repeatWindow{}}
}

func (l *repeatLimiter) admit(name, msg string) (ok bool, held int) {
	if !l.lines[msg] {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := name + "\x00" + msg
	w := l.wins[key]
	if w == nil {
		w = &repeatWindow{}
		l.wins[key] = w
	}
	return w.admit(l.now(), l.every)
}

// limitedLogger is an hclog.Logger whose repeating lines go through a
// repeatLimiter; loggers derived from it (Named, With) share the limiter.
type limitedLogger struct {
	hclog.Logger
	lim *repeatLimiter
}

// limitRepeats wraps l.
func limitRepeats(l hclog.Logger, every time.Duration) hclog.Logger {
	return limitedLogger{Logger: l, lim: newRepeatLimiter(every, time.Now, repeatingLines)}
}

func (l limitedLogger) logf(level hclog.Level, msg string, args []any) {
	ok, held := l.lim.admit(l.Logger.Name(), msg)
	if !ok {
		return
	}
	if held > 0 {
		args = append(args[:len(args):len(args)], "repeats_held_back", held, "window", l.lim.every)
	}
	l.Logger.Log(level, msg, args...)
}

// Log implements hclog.Logger.
func (l limitedLogger) Log(level hclog.Level, msg string, args ...any) { l.logf(level, msg, args) }

// Trace implements hclog.Logger.
func (l limitedLogger) Trace(msg string, args ...any) { l.logf(hclog.Trace, msg, args) }

// Debug implements hclog.Logger.
func (l limitedLogger) Debug(msg string, args ...any) { l.logf(hclog.Debug, msg, args) }

// Info implements hclog.Logger.
func (l limitedLogger) Info(msg string, args ...any) { l.logf(hclog.Info, msg, args) }

// Warn implements hclog.Logger.
func (l limitedLogger) Warn(msg string, args ...any) { l.logf(hclog.Warn, msg, args) }

// Error implements hclog.Logger.
func (l limitedLogger) Error(msg string, args ...any) { l.logf(hclog.Error, msg, args) }

// With implements hclog.Logger.
func (l limitedLogger) With(args ...any) hclog.Logger {
	return limitedLogger{Logger: l.Logger.With(args...), lim: l.lim}
}

// Named implements hclog.Logger.
func (l limitedLogger) Named(name string) hclog.Logger {
	return limitedLogger{Logger: l.Logger.Named(name), lim: l.lim}
}

// ResetNamed implements hclog.Logger.
func (l limitedLogger) ResetNamed(name string) hclog.Logger {
	return limitedLogger{Logger: l.Logger.ResetNamed(name), lim: l.lim}
}

// routineWarnings are hashicorp/raft warnings of the ordinary course of a
// cluster (a member that starts without a leader campaigns), logged at
// Info so that a host's Info logger does not show them as problems.
var routineWarnings = map[string]bool{
	"heartbeat timeout reached, starting election": true,
}

// raftLogger is the logger hashicorp/raft gets: l, but below Warn only
// when the host's logger is at Debug or finer (a host debugging sees every
// line); otherwise raft's Info lines (7 of them for a member's start and
// election) are dropped, and jobraft logs one line per state change itself
// (observe.go). Routine warnings count as Info.
func raftLogger(l hclog.Logger, host hclog.Logger) hclog.Logger {
	if host.GetLevel() <= hclog.Debug && host.GetLevel() != hclog.NoLevel {
		return l
	}
	return floorLogger{Logger: l, floor: hclog.Warn}
}

// floorLogger drops lines below floor.
type floorLogger struct {
	hclog.Logger
	floor hclog.Level
}

func (l floorLogger) log(level hclog.Level, msg string, args []any) {
	if level == hclog.Warn && routineWarnings[msg] {
		level = hclog.Info
	}
	if level < l.floor {
		return
	}
	l.Logger.Log(level, msg, args...)
}

// Log implements hclog.Logger.
func (l floorLogger) Log(level hclog.Level, msg string, args ...any) { l.log(level, msg, args) }

// Trace implements hclog.Logger.
func (l floorLogger) Trace(msg string, args ...any) { l.log(hclog.Trace, msg, args) }

// Debug implements hclog.Logger.
func (l floorLogger) Debug(msg string, args ...any) { l.log(hclog.Debug, msg, args) }

// Info implements hclog.Logger.
func (l floorLogger) Info(msg string, args ...any) { l.log(hclog.Info, msg, args) }

// Warn implements hclog.Logger.
func (l floorLogger) Warn(msg string, args ...any) { l.log(hclog.Warn, msg, args) }

// Error implements hclog.Logger.
func (l floorLogger) Error(msg string, args ...any) { l.log(hclog.Error, msg, args) }

// IsTrace implements hclog.Logger.
func (l floorLogger) IsTrace() bool { return l.floor <= hclog.Trace && l.Logger.IsTrace() }

// IsDebug implements hclog.Logger.
func (l floorLogger) IsDebug() bool { return l.floor <= hclog.Debug && l.Logger.IsDebug() }

// IsInfo implements hclog.Logger.
func (l floorLogger) IsInfo() bool { return l.floor <= hclog.Info && l.Logger.IsInfo() }

// With implements hclog.Logger.
func (l floorLogger) With(args ...any) hclog.Logger {
	return floorLogger{Logger: l.Logger.With(args...), floor: l.floor}
}

// Named implements hclog.Logger.
func (l floorLogger) Named(name string) hclog.Logger {
	return floorLogger{Logger: l.Logger.Named(name), floor: l.floor}
}

// ResetNamed implements hclog.Logger.
func (l floorLogger) ResetNamed(name string) hclog.Logger {
	return floorLogger{Logger: l.Logger.ResetNamed(name), floor: l.floor}
}

var _ hclog.Logger = floorLogger{}
