package main

import (
	"net"
	"testing"
	"time"
)

// TestLimitListener: at most n accepted connections at a time; a closed
// one frees its slot once, however often it is closed; Close ends a
// pending Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 2)
	defer ln.Close()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	first, second := <-accepted, <-accepted
	if ln.Active() != 2 {
		t.Fatalf("active %d, want 2", ln.Active())
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with 2 open and a limit of 2")
	case <-time.After(300 * time.Millisecond): // absence of an accept, not a wait for state
	}
	first.Close()
	first.Close()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	if ln.Active() != 2 {
		t.Fatalf("active %d after a double close and an accept, want 2", ln.Active())
	}
	second.Close()
	fourth, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a fourth connection was not accepted after another closed")
	}
	ln.Close()
	if _, ok := <-accepted; ok {
		t.Fatal("Accept returned a connection after Close")
	}
}
