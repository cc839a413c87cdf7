package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/examples/client"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// Readiness bounds: how long selfStatus waits for the leader's read index,
// then for this member to apply up to it.
const (
	readyReadTimeout  = time.Second
	readyApplyTimeout = 250 * time.Millisecond
)

// selfStatus is this member's status with readiness: a leader is known, the
// member is healthy (not diverged, its log not failed, not removed), and
// its state machine applied up to the leader's commit index, read now
// (raft.Node.ReadIndex: LeaderCommitIndex). Its own commit index is no
// measure: a member catching up knows one far behind the leader's, or 0.
// Entries raft never hands to the state machine (the no-op a new leader
// commits) count as applied once everything before them is
// (raft.Node.WaitApplied).
func selfStatus(ctx context.Context, node *raft.Node) client.Status {
	st := node.Status()
	ready := false
	var leaderCommit uint64
	if st.LeaderID != "" && st.Diverged == nil && st.LogFailed == "" && st.Removed == nil {
		rctx, cancel := context.WithTimeout(ctx, readyReadTimeout)
		idx, err := node.ReadIndex(rctx)
		cancel()
		if err == nil {
			leaderCommit = idx
			wctx, cancel := context.WithTimeout(ctx, readyApplyTimeout)
			ready = node.WaitApplied(wctx, idx) == nil
			cancel()
			st.AppliedIndex = node.AppliedIndex()
		}
	}
	s := statusOf(st, ready)
	s.LeaderCommitIndex = leaderCommit
	return s
}

// progressOf is the leader's catch-up line of each member (the leader's
// own status when self leads; else asked of the leader; nil if it cannot
// be had).
func progressOf(ctx context.Context, node *raft.Node, self client.Status) map[string]raft.MemberProgress {
	prog := self.Progress
	if prog == nil {
		prog, _ = leaderProgress(ctx, node)
	}
	if prog == nil {
		return nil
	}
	out := make(map[string]raft.MemberProgress, len(prog))
	for _, p := range prog {
		out[p.ID] = p
	}
	return out
}

// memberStatuses asks every member in the configuration for its status
// (the status RPC), concurrently. Another member is ready when it knows a
// leader, is healthy, applied up to its commit index and, by the leader's
// catch-up monitor, holds the leader's log (caught_up; when the leader's
// view can be had): a member catching up knows a commit index far behind
// the leader's, or 0.
func memberStatuses(ctx context.Context, node *raft.Node, self client.Status) []client.Member {
	prog := progressOf(ctx, node, self)
	out := make([]client.Member, len(self.Members))
	var wg sync.WaitGroup
	for i, m := range self.Members {
		out[i] = client.Member{ID: m.ID, Address: m.Address, Voter: m.Voter}
		if m.ID == self.ID {
			out[i].Status = &self
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := node.StatusOf(ctx, m.Address)
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			ready := st.LeaderID != "" && st.Diverged == nil && st.LogFailed == "" && st.Removed == nil && st.AppliedIndex >= st.CommitIndex
			if p, ok := prog[m.ID]; ok && p.State != raft.StateCaughtUp && p.State != raft.StateLeader {
				ready = false // catching up, stalled or diverged, by the leader's monitor
			}
			s := statusOf(st, ready)
			out[i].Status = &s
			if self.LastIndex > st.LastIndex {
				out[i].Lag = self.LastIndex - st.LastIndex
			}
		}()
	}
	wg.Wait()
	return out
}

// GET /v1/cluster/status[?members=0]: this member's status and, unless
// members=0, every member's (asked over the status RPC).
func (s *server) clusterStatus(w http.ResponseWriter, r *http.Request) error {
	node := s.ctl.Node()
	self := selfStatus(r.Context(), node)
	out := client.ClusterStatus{Self: self}
	if r.URL.Query().Get("members") != "0" {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		out.Members = memberStatuses(ctx, node, self)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// GET /v1/cluster/walcompare[?from=&to=]: compares the members' logs online
// (range digests over the members' RPC channel, never stopping them) and
// returns the walcompare report; committed_divergences must be 0. from and
// to are the first and last index to compare, both included; the report's
// ranges are half-open ([from, end), divergence runs [index, end)).
func (s *server) walcompare(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var opts walcompare.Options
	for name, dst := range map[string]*uint64{"from": &opts.From, "to": &opts.To} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return bad("%s must be an index", name)
			}
			*dst = n
		}
	}
	if opts.To != 0 && opts.From > opts.To {
		return bad("from %d is above to %d", opts.From, opts.To)
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	self := s.ctl.Node().Status()
	var members []walcompare.Member
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for _, m := range self.Members {
		lm, err := walcompare.Dial(ctx, m.ID, m.Address, s.clusterTLS)
		if err != nil {
			writeError(w, http.StatusBadGateway, "member_unreachable", fmt.Sprintf("member %s (%s): %v", m.ID, m.Address, err))
			return nil
		}
		members = append(members, lm)
	}
	start := time.Now()
	rep, err := walcompare.Compare(ctx, members, opts)
	if err != nil {
		return err
	}
	s.compare.set(compareRun{At: start, By: "API", Took: time.Since(start), Report: rep})
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// GET /v1/watch?from=&queue=&event=&kind=&job=: committed job events as
// server-sent events ("id" is the raft index; resume with
// Last-Event-ID or from=index+1). The stream ends with an "error" event.
// event= filters by event kind (acked, ...), kind= by job kind, as kind=
// means everywhere else in the API. kind= once filtered by event kind: a
// kind= naming an event kind is refused (400, pointing at event=) rather
// than silently meaning something else, so a job kind spelled like an
// event kind cannot be watched by kind (watch by queue or job instead).
func (s *server) watch(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var from uint64
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return bad("from must be an index")
		}
		from = n
	} else if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return bad("Last-Event-ID must be an index")
		}
		from = n + 1
	}
	var f jobraft.WatchFilter
	if v := q.Get("queue"); v != "" {
		f.Queues = strings.Split(v, ",")
		if slices.Contains(f.Queues, "") {
			return bad("queue: an empty queue name in %q", v)
		}
	}
	if v := q.Get("event"); v != "" {
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(watchKinds, jobraft.EventKind(k)) {
				return bad("event %q is not an event kind (%s)", k, joinKinds(watchKinds))
			}
			f.Kinds = append(f.Kinds, jobraft.EventKind(k))
		}
	}
	var jobKinds []string
	if v := q.Get("kind"); v != "" {
		jobKinds = strings.Split(v, ",")
		for _, k := range jobKinds {
			switch {
			case k == "":
				return bad("kind: an empty job kind in %q", v)
			case slices.Contains(watchKinds, jobraft.EventKind(k)):
				return bad("kind=%s: kind filters by job kind; %s is an event kind: use event=%s", k, k, k)
			}
		}
	}
	if f.JobID = q.Get("job"); f.JobID != "" {
		if err := checkJobID(f.JobID); err != nil {
			return err
		}
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("streaming unsupported")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events, err := s.ctl.Watch(ctx, from, f)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	// Each write gets writeTimeout: a client that stops reading is cut.
	writable := func() { _ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) }
	writable()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if len(jobKinds) > 0 && ev.Kind != jobraft.EventError && !slices.Contains(jobKinds, ev.JobKind) {
				if len(events) == 0 {
					flusher.Flush() // what was written before it
				}
				continue
			}
			writable()
			if err := writeEvent(w, ev); err != nil {
				return nil // the client went away
			}
			if len(events) == 0 {
				flusher.Flush()
			}
			if ev.Kind == jobraft.EventError {
				flusher.Flush()
				return nil
			}
		case <-keepalive.C:
			writable()
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			flusher.Flush()
		}
	}
}

// watchKinds are the kinds a watch may filter on (the stream's final
// "error" event always comes, whatever the filter).
var watchKinds = []jobraft.EventKind{
	jobraft.EventSubmitted, jobraft.EventClaimed, jobraft.EventExtended, jobraft.EventAcked, jobraft.EventNaked,
	jobraft.EventTermed, jobraft.EventCanceled, jobraft.EventRetried, jobraft.EventExpired, jobraft.EventPaused,
	jobraft.EventResumed, jobraft.EventSwept,
}

func joinKinds(ks []jobraft.EventKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func writeEvent(w http.ResponseWriter, ev jobraft.Event) error {
	b, err := json.Marshal(eventOf(ev))
	if err != nil {
		return err
	}
	if ev.Kind == jobraft.EventError {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Kind, b)
	} else {
		_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Index, ev.Kind, b)
	}
	return err
}
