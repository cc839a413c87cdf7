package main

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections at a time: with n open,
// Accept waits until one closes, and further clients wait in the kernel's
// listen backlog, holding none of the process's file descriptors. With the
// read timeouts (headers, then body) and the reply write timeout it bounds
// what slow or idle clients can hold. Watch streams count as connections.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and ends a pending Accept.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Active is the number of slots taken: accepted connections not yet
// closed, plus the one a pending Accept holds while it waits.
func (l *limitListener) Active() int { return len(l.slots) }

// limitConn frees its slot on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite keeps the TCP half-close the HTTP server uses to let a client
// read a reply before the connection is closed under its unread request.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
