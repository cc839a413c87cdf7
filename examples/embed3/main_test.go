package main

import (
	"context"
	"testing"
	"time"
)

// TestEmbed3: three members in one process form a cluster; a job
// submitted on one completes and is read on another.
func TestEmbed3(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runLocal(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := "welcome-42 succeeded: HELLO (submitted on n3, read on n1)"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
