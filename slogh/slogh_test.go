package slogh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/internal/nodetest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/slogh"
)

// sink is a JSON slog handler writing into a buffer, and the records it
// wrote, decoded.
type sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *sink) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	s.buf.Reset()
	return out
}

func newSink(level slog.Leveler, source bool) (*sink, hclog.Logger) {
	s := &sink{}
	return s, slogh.New(slog.NewJSONHandler(s, &slog.HandlerOptions{Level: level, AddSource: source}))
}

func TestLevels(t *testing.T) {
	s, l := newSink(slogh.LevelTrace, false)
	l.Trace("t")
	l.Debug("d")
	l.Info("i")
	l.Warn("w")
	l.Error("e")
	l.Log(hclog.NoLevel, "n")
	l.Log(hclog.Off, "off")
	var got []string
	for _, r := range s.records(t) {
		got = append(got, r["level"].(string)+":"+r["msg"].(string))
	}
	want := []string{"DEBUG-4:t", "DEBUG:d", "INFO:i", "WARN:w", "ERROR:e", "INFO:n"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if l.GetLevel() != hclog.Trace || !l.IsTrace() {
		t.Fatalf("level %v, IsTrace %v with a trace handler", l.GetLevel(), l.IsTrace())
	}
}

// The handler's level decides by default; SetLevel narrows it for the
// logger and every logger derived from it.
func TestHandlerLevelAndSetLevel(t *testing.T) {
	s, l := newSink(slog.LevelInfo, false)
	if l.IsDebug() || !l.IsInfo() || l.GetLevel() != hclog.Info {
		t.Fatalf("info handler: IsDebug %v IsInfo %v GetLevel %v", l.IsDebug(), l.IsInfo(), l.GetLevel())
	}
	sub := l.Named("sub").With("k", "v")
	l.Debug("dropped")
	sub.Info("kept")
	l.SetLevel(hclog.Warn)
	sub.Info("dropped too")
	sub.Warn("warned")
	if sub.IsInfo() || sub.GetLevel() != hclog.Warn {
		t.Fatalf("after SetLevel(Warn): derived IsInfo %v, GetLevel %v", sub.IsInfo(), sub.GetLevel())
	}
	l.SetLevel(hclog.Off)
	l.Error("silenced")
	if l.IsError() || l.GetLevel() != hclog.Off {
		t.Fatal("Off still logs")
	}
	l.SetLevel(hclog.NoLevel)
	l.Info("handler decides again")
	var msgs []string
	for _, r := range s.records(t) {
		msgs = append(msgs, r["msg"].(string))
	}
	if want := []string{"kept", "warned", "handler decides again"}; !reflect.DeepEqual(msgs, want) {
		t.Fatalf("messages %v, want %v", msgs, want)
	}
}

func TestNamesAndImpliedArgs(t *testing.T) {
	s, root := newSink(slog.LevelDebug, false)
	l := root.Named("jobraft").Named("controller").With("member", "m1", "term", 3)
	if l.Name() != "jobraft.controller" || root.Name() != "" {
		t.Fatalf("names %q, %q", l.Name(), root.Name())
	}
	if got := l.ImpliedArgs(); !reflect.DeepEqual(got, []any{"member", "m1", "term", 3}) {
		t.Fatalf("implied args %v", got)
	}
	l.Info("started", "index", uint64(7), "error", errors.New("boom"))
	l.ResetNamed("raft").Warn("odd", "lonely")
	root.Info("plain", 42, "x", "f", hclog.Fmt("%d-%s", 1, "a"), "h", hclog.Hex(255), "o", hclog.Octal(8), "b", hclog.Binary(5), "q", hclog.Quote("a\"b"))
	rs := s.records(t)
	want := []map[string]any{
		{"level": "INFO", "msg": "started", "logger": "jobraft.controller", "member": "m1", "term": 3.0, "index": 7.0, "error": "boom"},
		{"level": "WARN", "msg": "odd", "logger": "raft", "member": "m1", "term": 3.0, hclog.MissingKey: "lonely"},
		{"level": "INFO", "msg": "plain", "42": "x", "f": "1-a", "h": "0xff", "o": "010", "b": "0b101", "q": `"a\"b"`},
	}
	if !reflect.DeepEqual(rs, want) {
		t.Fatalf("records\n%v\nwant\n%v", rs, want)
	}
	if odd := root.With("k"); !reflect.DeepEqual(odd.ImpliedArgs(), []any{hclog.MissingKey, "k"}) {
		t.Fatalf("odd implied args %v", odd.ImpliedArgs())
	}
}

// The record's source is the line that called the hclog method.
func TestSourceIsTheCaller(t *testing.T) {
	s, l := newSink(slog.LevelInfo, true)
	l.Info("here")
	l.Log(hclog.Info, "there")
	for _, r := range s.records(t) {
		src, _ := r["source"].(map[string]any)
		if file, _ := src["file"].(string); filepath.Base(file) != "slogh_test.go" {
			t.Fatalf("record %q: source %v, want this test file", r["msg"], src)
		}
	}
}

func TestStandardLogger(t *testing.T) {
	s, l := newSink(slogh.LevelTrace, false)
	l.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] slow client")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true, InferLevelsWithTimestamp: true}).Print("2026/01/02 03:04:05 [ERR] broken")
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}).Print("[ERROR] forced")
	l.StandardLogger(nil).Print("[WARN] kept as is")
	var got []string
	for _, r := range s.records(t) {
		got = append(got, r["level"].(string)+":"+r["msg"].(string)+":"+asString(r["logger"]))
	}
	want := []string{"WARN:slow client:http", "ERROR:broken:", "DEBUG:forced:", "INFO:[WARN] kept as is:"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

func asString(v any) string { s, _ := v.(string); return s }

// A Controller configured with the adapter logs through the slog handler:
// its own records (named, with the member) and hashicorp/raft's.
func TestControllerLogsThroughSlog(t *testing.T) {
	s, l := newSink(slog.LevelDebug, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := jobraft.Open(ctx, jobraft.Config{Config: raft.Config{
		ID: "solo", DataDir: t.TempDir(), BindAddr: nodetest.FreeAddr(t), Bootstrap: true,
		HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, Logger: l,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var names map[string]bool
	nodetest.WaitFor(t, 20*time.Second, "the controller's leader duties to start", func() bool {
		for _, r := range s.records(t) {
			if names == nil {
				names = map[string]bool{}
			}
			names[asString(r["logger"])] = true
			if r["msg"] == "leader duties start" && strings.HasSuffix(asString(r["logger"]), "controller") && r["member"] == "solo" {
				return true
			}
		}
		return false
	})
	t.Logf("logger names seen: %v", names)
}
