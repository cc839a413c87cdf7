//go:build linux

package netrig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Ping measures n round trips of 64 bytes on one connection from member
// from to member to's raft address, through from's proxy for to, and
// returns them sorted. Member to's raft port must be free: an echo server
// stands in for the member there meanwhile.
func (r *Rig) Ping(ctx context.Context, from, to, n int) ([]time.Duration, error) {
	l, err := r.Listen(to, r.RaftListen(to))
	if err != nil {
		return nil, fmt.Errorf("netrig: echo for member %d: %w", to, err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	c, err := r.Dial(ctx, from, r.RaftAddr(to))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	out := make([]time.Duration, 0, n)
	msg := make([]byte, 64)
	for range n {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		if _, err := io.ReadFull(c, msg); err != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		out = append(out, time.Since(t0))
	}
	slices.Sort(out)
	return out, nil
}
