package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestEmbeddingExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := run(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := "welcome-42 succeeded: HELLO"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// TestEmbeddingProgramIsQuiet runs the example as a program (this test
// binary re-executed into main) with jobraft's default logger: a start, an
// election, a job and a close write at most 4 lines to stderr (the
// listener, "leading", the close; hashicorp/raft's Info lines are quiet
// unless the host's logger debugs). It counts lines: log volume is what is
// under test, not cluster state.
func TestEmbeddingProgramIsQuiet(t *testing.T) {
	if os.Getenv("JOBRAFT_EMBED_CHILD") == "1" {
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmbeddingProgramIsQuiet$")
	cmd.Env = append(os.Environ(), "JOBRAFT_EMBED_CHILD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("embed: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "welcome-42 succeeded: HELLO") {
		t.Fatalf("embed printed %q", stdout.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) > 4 {
		t.Fatalf("embed wrote %d lines to stderr, want at most 4:\n%s", len(lines), stderr.String())
	}
	if !strings.Contains(stderr.String(), "leading") {
		t.Fatalf("embed's stderr has no line for becoming leader:\n%s", stderr.String())
	}
}

// TestReadmeEmbedsTheExample: the README's embedding snippet is this
// program, whole, so it compiles with its imports as shown.
func TestReadmeEmbedsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	block := "```go\n" + strings.TrimRight(string(src), "\n") + "\n```"
	if !strings.Contains(string(readme), block) {
		t.Fatal("README.md does not show examples/embed/main.go whole in a ```go block: copy it there")
	}
}
