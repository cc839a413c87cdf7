package slogh

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// NameKey is the attribute that carries a logger's name (Named).
const NameKey = "logger"

// LevelTrace is the slog level of hclog's Trace.
const LevelTrace = slog.LevelDebug - 4

// logger is the hclog.Logger over a slog.Handler.
type logger struct {
	h       slog.Handler // implied arguments applied
	name    string
	implied []any
	// level is shared by every logger derived from one New: hclog.NoLevel
	// leaves the choice to the handler.
	level *atomic.Int32
}

var _ hclog.Logger = (*logger)(nil)

// New returns an hclog.Logger that writes every record through h. A nil h
// panics (a programmer's error).
func New(h slog.Handler) hclog.Logger {
	if h == nil {
		panic("slogh: nil slog.Handler")
	}
	return &logger{h: h, level: new(atomic.Int32)}
}

// toSlog maps an hclog level; ok is false for Off.
func toSlog(l hclog.Level) (slog.Level, bool) {
	switch l {
	case hclog.Trace:
		return LevelTrace, true
	case hclog.Debug:
		return slog.LevelDebug, true
	case hclog.Warn:
		return slog.LevelWarn, true
	case hclog.Error:
		return slog.LevelError, true
	case hclog.Off:
		return 0, false
	}
	return slog.LevelInfo, true // Info, NoLevel
}

func (l *logger) enabled(level hclog.Level) (slog.Level, bool) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	sl, ok := toSlog(level)
	if min := hclog.Level(l.level.Load()); !ok || min == hclog.Off || (min != hclog.NoLevel && level < min) {
		return 0, false
	}
	return sl, l.h.Enabled(context.Background(), sl)
}

// log writes one record; skip is the number of frames between the
// caller of the public method and runtime.Callers (0: no source).
func (l *logger) log(skip int, level hclog.Level, msg string, args []any) {
	sl, ok := l.enabled(level)
	if !ok {
		return
	}
	var pc uintptr
	if skip > 0 {
		var pcs [1]uintptr
		runtime.Callers(skip, pcs[:])
		pc = pcs[0]
	}
	r := slog.NewRecord(time.Now(), sl, msg, pc)
	if l.name != "" {
		r.AddAttrs(slog.String(NameKey, l.name))
	}
	r.AddAttrs(attrs(args)...)
	_ = l.h.Handle(context.Background(), r) // hclog has no way to report it
}

// attrs turns hclog's alternating keys and values into slog attributes.
func attrs(args []any) []slog.Attr {
	out := make([]slog.Attr, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, slog.Any(hclog.MissingKey, value(args[i])))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		out = append(out, slog.Any(key, value(args[i+1])))
	}
	return out
}

// value formats hclog's formatting types as hclog does; anything else is
// the handler's to render.
func value(v any) any {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) > 0 {
			if f, ok := v[0].(string); ok {
				return fmt.Sprintf(f, v[1:]...)
			}
		}
		return fmt.Sprint(v...)
	case hclog.Hex:
		return "0x" + strconv.FormatUint(uint64(v), 16)
	case hclog.Octal:
		return "0" + strconv.FormatUint(uint64(v), 8)
	case hclog.Binary:
		return "0b" + strconv.FormatUint(uint64(v), 2)
	case hclog.Quote:
		return strconv.Quote(string(v))
	}
	return v
}

// Frames from runtime.Callers to the caller of a public logging method:
// Callers, log, the method.
const callerSkip = 3

// Log implements hclog.Logger.
func (l *logger) Log(level hclog.Level, msg string, args ...any) {
	l.log(callerSkip, level, msg, args)
}

// Trace implements hclog.Logger.
func (l *logger) Trace(msg string, args ...any) { l.log(callerSkip, hclog.Trace, msg, args) }

// Debug implements hclog.Logger.
func (l *logger) Debug(msg string, args ...any) { l.log(callerSkip, hclog.Debug, msg, args) }

// Info implements hclog.Logger.
func (l *logger) Info(msg string, args ...any) { l.log(callerSkip, hclog.Info, msg, args) }

// Warn implements hclog.Logger.
func (l *logger) Warn(msg string, args ...any) { l.log(callerSkip, hclog.Warn, msg, args) }

// Error implements hclog.Logger.
func (l *logger) Error(msg string, args ...any) { l.log(callerSkip, hclog.Error, msg, args) }

func (l *logger) is(level hclog.Level) bool { _, ok := l.enabled(level); return ok }

// IsTrace implements hclog.Logger.
func (l *logger) IsTrace() bool { return l.is(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (l *logger) IsDebug() bool { return l.is(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (l *logger) IsInfo() bool { return l.is(hclog.Info) }

// IsWarn implements hclog.Logger.
func (l *logger) IsWarn() bool { return l.is(hclog.Warn) }

// IsError implements hclog.Logger.
func (l *logger) IsError() bool { return l.is(hclog.Error) }

// ImpliedArgs implements hclog.Logger: the arguments given to With, in
// order (a copy).
func (l *logger) ImpliedArgs() []any { return append([]any(nil), l.implied...) }

// With implements hclog.Logger.
func (l *logger) With(args ...any) hclog.Logger {
	if len(args) == 0 {
		return l
	}
	n := *l
	n.implied = append(append([]any(nil), l.implied...), args...)
	if len(args)%2 == 1 {
		n.implied = append(n.implied[:len(n.implied)-1], hclog.MissingKey, args[len(args)-1])
	}
	n.h = l.h.WithAttrs(attrs(args))
	return &n
}

// Name implements hclog.Logger.
func (l *logger) Name() string { return l.name }

// Named implements hclog.Logger.
func (l *logger) Named(name string) hclog.Logger {
	n := *l
	if l.name != "" && name != "" {
		n.name = l.name + "." + name
	} else if name != "" {
		n.name = name
	}
	return &n
}

// ResetNamed implements hclog.Logger.
func (l *logger) ResetNamed(name string) hclog.Logger {
	n := *l
	n.name = name
	return &n
}

// SetLevel implements hclog.Logger: it limits this logger and every one
// derived from the same New (hclog.NoLevel: the handler alone decides).
func (l *logger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

// GetLevel implements hclog.Logger.
func (l *logger) GetLevel() hclog.Level {
	if lv := hclog.Level(l.level.Load()); lv != hclog.NoLevel {
		return lv
	}
	for lv := hclog.Trace; lv <= hclog.Error; lv++ {
		if l.is(lv) {
			return lv
		}
	}
	return hclog.Off
}

// StandardLogger implements hclog.Logger.
func (l *logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter implements hclog.Logger: each write is one record; a
// leading [TRACE], [DEBUG], [INFO], [WARN], [ERROR] or [ERR] sets its
// level with InferLevels and is dropped with ForceLevel.
func (l *logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &stdWriter{l: l, opts: *opts}
}

type stdWriter struct {
	l    *logger
	opts hclog.StandardLoggerOptions
}

var leadingTime = regexp.MustCompile(`^[\d\s:/.+\-TZ]*`)

var prefixes = []struct {
	p     string
	level hclog.Level
}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error}}

func (w *stdWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, " \t\r\n"))
	if w.opts.InferLevels && w.opts.InferLevelsWithTimestamp && w.opts.ForceLevel == hclog.NoLevel {
		line = line[len(leadingTime.FindString(line)):]
	}
	level := hclog.Info
	if w.opts.InferLevels || w.opts.ForceLevel != hclog.NoLevel {
		for _, x := range prefixes {
			if strings.HasPrefix(line, x.p) {
				level, line = x.level, strings.TrimSpace(line[len(x.p):])
				break
			}
		}
	}
	if w.opts.ForceLevel != hclog.NoLevel {
		level = w.opts.ForceLevel
	}
	w.l.log(0, level, line, nil)
	return len(p), nil
}
