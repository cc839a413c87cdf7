package clustertest

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobraft/jobraft/internal/test/history"
	"github.com/jobraft/jobraft/internal/test/stalltest"
	"github.com/jobraft/jobraft/raft"
	"github.com/jobraft/jobraft/walcompare"
)

// CtlProcs is a cluster of controller child processes (Proc): the test
// binary re-executed as members (the test's TestMain must call Main
// first). Each serves the member API (Handler) over HTTP on loopback.
// Members are killed with SIGKILL, paused with SIGSTOP: real crashes and
// real pauses. Each records its applied history to a file in its data
// dir; the convergence wait of its Group checks it while it polls (see
// RequireApplied). Its WaitLeader waits for a leader serving a
// linearizable read; its final applied check needs a running leader.
type CtlProcs struct {
	*Group
	t      testing.TB
	Cfgs   []MemberConfig
	procs  []*Proc
	client *http.Client
}

// newCtlProcs is a cluster of the members cfgs (not started), their logs
// in base.
func newCtlProcs(t testing.TB, base string, cfgs []MemberConfig) *CtlProcs {
	p := &CtlProcs{t: t, Cfgs: cfgs, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	p.Group = NewGroup(t, p.members, Policy{ServingLeader: true, AppliedEvery: appliedCheckEvery, FinalNeedsLeader: true})
	for _, mc := range cfgs {
		p.procs = append(p.procs, &Proc{Name: mc.ID, Path: os.Args[0], Args: []string{"-test.run=^$"}, LogPath: filepath.Join(base, mc.ID+".log")})
	}
	for i := range cfgs {
		p.Start(i)
	}
	t.Cleanup(p.Close)
	return p
}

// StartCtlProcs starts an n-member child-process cluster; tweak may adjust
// each member's config. A member tweak marks Join is started empty and
// left out of the others' initial configuration: a spare that joins when
// the cluster adds it (POST /add).
func StartCtlProcs(t testing.TB, n int, tweak func(i int, mc *MemberConfig)) *CtlProcs {
	t.Helper()
	base := t.TempDir()
	var cfgs []MemberConfig
	var members []raft.Member
	for i := 0; i < n; i++ {
		mc := ctlMemberConfig(t, base, fmt.Sprintf("p%d", i))
		if tweak != nil {
			tweak(i, &mc)
		}
		if !mc.Join { // a joiner (tweak set Join) waits, outside, to be added
			members = append(members, raft.Member{ID: mc.ID, Address: mc.RaftAddr, Voter: true})
		}
		cfgs = append(cfgs, mc)
	}
	for i := range cfgs {
		cfgs[i].Members = members
	}
	return newCtlProcs(t, base, cfgs)
}

// StartJoiner starts one empty, not bootstrapped member id in a child
// process (MemberConfig.Join), for a running cluster (in this process or
// not) to add at p.Cfgs[0].RaftAddr; tweak may adjust its config. A
// member in its own process takes none of the test process's CPU: what
// it costs the cluster is what the cluster's members pay for it.
func StartJoiner(t testing.TB, id string, tweak func(mc *MemberConfig)) *CtlProcs {
	t.Helper()
	base := t.TempDir()
	mc := ctlMemberConfig(t, base, id)
	mc.Join = true
	if tweak != nil {
		tweak(&mc)
	}
	return newCtlProcs(t, base, []MemberConfig{mc})
}

// ctlMemberConfig is member id's config with the test defaults.
func ctlMemberConfig(t testing.TB, base, id string) MemberConfig {
	return MemberConfig{
		ID: id, DataDir: filepath.Join(base, id), RaftAddr: FreeAddr(t), HTTPAddr: FreeAddr(t),
		LeaseTTL: 10 * time.Second, ExpireInterval: 100 * time.Millisecond,
	}
}

// Start (re)starts member i's process from its data dir, with its config
// as it is now.
func (p *CtlProcs) Start(i int) {
	p.t.Helper()
	spec, _ := json.Marshal(p.Cfgs[i])
	p.procs[i].Env = []string{EnvCtl + "=" + string(spec)}
	if err := p.procs[i].Start(); err != nil {
		p.t.Fatal(err)
	}
}

// Exited reports whether member i's process was started and has exited
// on its own (it was not killed): it crashed or refused to start.
func (p *CtlProcs) Exited(i int) bool { died, _ := p.procs[i].Died(); return died }

// Logs returns the path of each member's log file.
func (p *CtlProcs) Logs() []string {
	var out []string
	for _, pr := range p.procs {
		out = append(out, pr.LogPath)
	}
	return out
}

// Kill SIGKILLs member i and reaps it.
func (p *CtlProcs) Kill(i int) { _ = p.procs[i].Kill() }

// Pause SIGSTOPs member i and returns once the kernel reports the process
// stopped (Proc.Pause), so what the caller measures from its return is
// time the member was really frozen.
func (p *CtlProcs) Pause(i int) {
	p.t.Helper()
	if err := p.procs[i].Pause(); err != nil && !errors.Is(err, ErrNotRunning) {
		p.t.Fatal(err)
	}
}

// Resume SIGCONTs member i.
func (p *CtlProcs) Resume(i int) { _ = p.procs[i].Resume() }

// Close kills every member; on failure it logs the tail of each log.
func (p *CtlProcs) Close() {
	for i := range p.Cfgs {
		p.Kill(i)
	}
	if p.t.Failed() {
		for _, pr := range p.procs {
			p.t.Logf("--- %s (tail)\n%s", filepath.Base(pr.LogPath), pr.LogTail(4000))
		}
	}
}

// Call sends req to member i's path and decodes the reply. An error means
// no reply (the member died or is paused): the outcome is unknown.
func (p *CtlProcs) Call(ctx context.Context, i int, path string, req Request) (Reply, error) {
	return p.Post(ctx, i, path, req)
}

// Post sends any JSON body to member i's path and decodes the reply (as
// Call; the chaos harness posts a FaultSpec to /faults).
func (p *CtlProcs) Post(ctx context.Context, i int, path string, req any) (Reply, error) {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.Cfgs[i].HTTPAddr+path, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Reply{}, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	var rep Reply
	err = json.NewDecoder(resp.Body).Decode(&rep)
	return rep, err
}

// CallT is Call with a timeout d.
func (p *CtlProcs) CallT(i int, path string, req Request, d time.Duration) (Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if req.Timeout == 0 {
		req.Timeout = d
	}
	return p.Call(ctx, i, path, req)
}

// Stall returns the scheduling stalls member i's process measured of
// itself within [from, to): its own stalltest watcher, which runs from
// the process's start (stalls before it are not known). The members run
// on this machine, so the instants of this process's clock are theirs. An
// error means no answer (the member died or is paused).
func (p *CtlProcs) Stall(i int, from, to time.Time) (stalltest.Stall, error) {
	rep, err := p.CallT(i, "/stall", Request{StallFrom: from.UnixNano(), StallTo: to.UnixNano()}, 5*time.Second)
	if err == nil && rep.Stall == nil {
		err = fmt.Errorf("%s: /stall answered no stall: %+v", p.Cfgs[i].ID, rep)
	}
	if err != nil {
		return stalltest.Stall{}, err
	}
	return *rep.Stall, nil
}

// members are the cluster's members as its Group sees them.
func (p *CtlProcs) members() []Member {
	out := make([]Member, len(p.procs))
	for i := range out {
		out[i] = ctlProcMember{p, i}
	}
	return out
}

// ctlProcMember is member i of a CtlProcs. It reads its config field by
// field, never whole: the chaos harness changes a member's ClockOffset
// while the checks run.
type ctlProcMember struct {
	p *CtlProcs
	i int
}

var _ Member = ctlProcMember{}

func (m ctlProcMember) ID() string { return m.p.Cfgs[m.i].ID }
func (m ctlProcMember) Up() bool   { return m.p.procs[m.i].Up() }

func (m ctlProcMember) Status(ctx context.Context) (raft.Status, error) {
	rep, err := m.p.Call(ctx, m.i, "/status", Request{})
	if err != nil {
		return raft.Status{}, err
	}
	return rep.Status(m.ID())
}

// Status is the raft status a /status reply of member id carries.
func (r Reply) Status(id string) (raft.Status, error) {
	s := raft.Status{ID: id, Role: r.Role, Term: r.Term, LeaderID: r.Leader, LastIndex: r.Last,
		CommitIndex: r.Commit, AppliedIndex: r.Applied, Digest: raft.Digest{Index: r.DigestIndex}}
	sum, err := hex.DecodeString(r.Digest)
	if err != nil || len(sum) != len(s.Digest.Sum) {
		return raft.Status{}, fmt.Errorf("%s: /status answered a digest of %d hex digits", id, len(r.Digest))
	}
	copy(s.Digest.Sum[:], sum)
	return s, nil
}

func (m ctlProcMember) LinearizableRead(ctx context.Context) error {
	req := Request{ID: "none"}
	if d, ok := ctx.Deadline(); ok {
		req.Timeout = time.Until(d)
	}
	rep, err := m.p.Call(ctx, m.i, "/get", req)
	if err == nil && rep.Outcome != OutcomeOK {
		err = fmt.Errorf("%s: /get: %s %s", m.ID(), rep.Outcome, rep.Error)
	}
	return err
}

func (m ctlProcMember) Log(ctx context.Context) (walcompare.Member, error) {
	return walcompare.Dial(ctx, m.ID(), m.p.Cfgs[m.i].RaftAddr, nil)
}

func (m ctlProcMember) Applied() history.Source {
	return history.FileSource(m.ID(), HistoryPath(m.p.Cfgs[m.i].DataDir))
}
