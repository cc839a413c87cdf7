package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// WatchRequest filters a watch. From is the first raft index to deliver
// (0: only events committed from now on; an index below the oldest the
// member retains, Stats.WatchOldest, is refused as compacted). Events are
// event kinds (submitted, claimed, acked, ...: event=), JobKinds job kinds
// (kind=, as elsewhere in the API).
type WatchRequest struct {
	From     uint64
	Queues   []string
	Events   []string
	JobKinds []string
	JobID    string
}

// ErrStop, returned by a Watch callback, ends the watch with a nil error.
var ErrStop = errors.New("jobd: stop watching")

// Watch delivers committed events to fn in index order until fn returns an
// error (ErrStop: Watch returns nil), ctx ends, or the stream ends with an
// error event (a *Error, e.g. the position was compacted: ErrRefused).
// When a member's stream breaks, Watch resumes on the next member from the
// index after the last event delivered: no event is delivered twice or
// skipped.
func (c *Client) Watch(ctx context.Context, r WatchRequest, fn func(Event) error) error {
	pos := &position{from: r.From}
	backoff := c.cfg.Backoff
	n := len(c.cfg.Endpoints)
	k := int(c.next.Load()) % n
	for fails := 0; ; {
		ep := c.cfg.Endpoints[k]
		progressed, err := c.watchFrom(ctx, ep, r, pos, fn)
		switch {
		case errors.Is(err, ErrStop):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			// The member ended the stream cleanly (shutdown): resume.
		case errors.Is(err, ErrUnavailable), errors.Is(err, ErrOutcomeUnknown):
			// Unreachable or cut: another member.
		default:
			return err
		}
		if progressed {
			fails = 0
		} else if fails++; fails >= c.cfg.Attempts {
			return err
		}
		k = (k + 1) % n
		if serr := sleep(ctx, backoff); serr != nil {
			return serr
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// position is how far a watch got: one entry may produce many events, so
// a resume starts at the last index delivered and skips the events of it
// already delivered (their order within an entry is the same on every
// member: the state machine is deterministic).
type position struct {
	from uint64 // before any event: the request's From
	last uint64 // index of the last event delivered (0: none yet)
	n    int    // events delivered at last
}

func (c *Client) watchFrom(ctx context.Context, ep string, r WatchRequest, pos *position, fn func(Event) error) (bool, error) {
	op := "GET /v1/watch"
	q := url.Values{}
	from := pos.from
	if pos.last > 0 {
		from = pos.last
	}
	if from > 0 {
		q.Set("from", strconv.FormatUint(from, 10))
	}
	if len(r.Queues) > 0 {
		q.Set("queue", strings.Join(r.Queues, ","))
	}
	if len(r.Events) > 0 {
		q.Set("event", strings.Join(r.Events, ","))
	}
	if len(r.JobKinds) > 0 {
		q.Set("kind", strings.Join(r.JobKinds, ","))
	}
	if r.JobID != "" {
		q.Set("job", r.JobID)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", ep+"/v1/watch?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	resp, err := c.http.Do(req)
	if err != nil {
		return false, transportError(ep, op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return false, replyError(ep, op, resp.StatusCode, b)
	}
	progressed := false
	skip := 0 // events of pos.last already delivered, seen again
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return progressed, &Error{Endpoint: ep, Op: op, Status: 200, Code: "bad_event", Reason: err.Error()}
		}
		if event == "error" || ev.Kind == "error" {
			e := &Error{Endpoint: ep, Op: op, Status: 200, Code: "watch_ended", Reason: ev.Error, class: ErrUnavailable}
			if strings.Contains(ev.Error, "compacted") {
				e.Code, e.class = "compacted", ErrRefused
			}
			return progressed, e
		}
		if pos.last > 0 && ev.Index == pos.last && skip < pos.n {
			skip++
			continue // delivered before the resume
		}
		if pos.last > 0 && ev.Index < pos.last {
			continue
		}
		if err := fn(ev); err != nil {
			return progressed, err
		}
		if ev.Index == pos.last {
			pos.n++
		} else {
			pos.last, pos.n = ev.Index, 1
		}
		skip = pos.n
		progressed = true
	}
	if err := sc.Err(); err != nil {
		return progressed, &Error{Endpoint: ep, Op: op, Err: fmt.Errorf("stream: %w", err), class: ErrUnavailable}
	}
	return progressed, nil
}
