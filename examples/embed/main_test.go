package main

import (
	"context"
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
