//go:build linux

package netrig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
)

// Options configures a rig.
type Options struct {
	Members int    // namespaces, one per member; default 3
	Dir     string // the proxies' logs go here (required)
	Proxy   string // the netproxy binary (Build)
}

// Ports every member uses in its own namespace (raft's differs per member:
// a member's namespace holds its peers' proxies on their ports).
const (
	raftPortBase = 7001 // member m listens for raft on raftPortBase+m
	httpPortBase = 8001 // and serves its HTTP API on httpPortBase+m
	apiPort      = 9000 // its proxies' Toxiproxy API, on its address
)

// Rig is a set of network namespaces, one per member, each with its own
// address on a bridge, and a Toxiproxy on every link between them.
type Rig struct {
	n      int
	slot   int    // the third octet of every address; also in rootLink
	prefix string // jobraft-<slot>-<pid>: every namespace's name starts so
	dir    string

	mu      sync.Mutex
	closed  bool
	procs   []*exec.Cmd
	done    []chan struct{}
	apis    []*toxiclient.Client
	proxies map[Link]*toxiclient.Proxy
	toxics  map[Link]map[string]bool // present toxics per link
}

// Link is the direction from member From to member To (0-based): the
// connections From opens to To, through From's proxy for To.
type Link struct{ From, To int }

func (l Link) name() string { return fmt.Sprintf("n%d-n%d", l.From+1, l.To+1) }

// Addr is member m's address: what it advertises and its peers dial (in
// their namespaces an alias that reaches their proxy for m).
func (r *Rig) Addr(m int) string { return fmt.Sprintf("198.18.%d.%d", r.slot, m+1) }

// inner is member m's second address, which only the proxies dial.
func (r *Rig) inner(m int) string { return fmt.Sprintf("198.19.%d.%d", r.slot, m+1) }

// RaftAddr is the host:port member m's peers dial.
func (r *Rig) RaftAddr(m int) string { return hostPort(r.Addr(m), raftPortBase+m) }

// HTTPAddr is member m's API address (reached from this process directly,
// through no proxy).
func (r *Rig) HTTPAddr(m int) string { return hostPort(r.Addr(m), httpPortBase+m) }

// Namespace is member m's network namespace.
func (r *Rig) Namespace(m int) string { return fmt.Sprintf("%s-n%d", r.prefix, m+1) }

func (r *Rig) hub() string { return r.prefix + "-hub" }

// rootLink is the veth end in this machine's namespace, the one name the
// rig takes there: ip refusing a second one with the same name is what
// keeps two rigs from sharing a slot (and so a subnet).
func rootLink(slot int) string { return fmt.Sprintf("jrs%d", slot) }

// Members is the number of member namespaces.
func (r *Rig) Members() int { return r.n }

func hostPort(host string, port int) string { return net.JoinHostPort(host, fmt.Sprint(port)) }

// Build compiles netproxy into dir/bin; moduleDir is the examples module.
func Build(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "bin", "netproxy")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./internal/netrig/netproxy")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build netproxy: %v\n%s", err, out)
	}
	return bin, nil
}

// Supported returns nil if this machine can host a rig, or an error
// wrapping ErrUnsupported that says why not.
func Supported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (ip netns add), running as uid %d", ErrUnsupported, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: ip(8) not found (Debian: apt-get install iproute2): %v", ErrUnsupported, err)
	}
	return nil
}

// New builds the namespaces and links and starts the proxies. Namespaces
// left by rigs whose process died are removed first. On error, whatever was
// built is removed again.
func New(ctx context.Context, opts Options) (_ *Rig, err error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if opts.Members == 0 {
		opts.Members = 3
	}
	if opts.Members < 1 || opts.Members > 200 || opts.Dir == "" || opts.Proxy == "" {
		return nil, fmt.Errorf("netrig: Options need 1..200 Members, a Dir and a Proxy binary (got %d, %q, %q)", opts.Members, opts.Dir, opts.Proxy)
	}
	if err := Sweep(); err != nil {
		return nil, err
	}
	r := &Rig{n: opts.Members, dir: opts.Dir, proxies: map[Link]*toxiclient.Proxy{}, toxics: map[Link]map[string]bool{}}
	if err := r.claimSlot(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Close())
		}
	}()
	if err := r.wire(); err != nil {
		return nil, err
	}
	if err := r.startProxies(ctx, opts.Proxy); err != nil {
		return nil, err
	}
	return r, nil
}

// claimSlot creates the hub namespace and the veth into it from this
// machine's namespace, at the first slot whose root link name is free.
func (r *Rig) claimSlot() error {
	pid := os.Getpid()
	for i := range 250 {
		r.slot = 1 + (pid+i)%250
		r.prefix = fmt.Sprintf("jobraft-%d-%d", r.slot, pid)
		if err := ip("netns", "add", r.hub()); err != nil {
			return fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		err := ip("link", "add", rootLink(r.slot), "type", "veth", "peer", "name", "up0", "netns", r.hub())
		if err == nil {
			return nil
		}
		_ = ip("netns", "del", r.hub())
		var ie *IPError
		if !errors.As(err, &ie) || !ie.exists() {
			return err
		}
	}
	return errors.New("netrig: all 250 slots taken (jrs1..jrs250 exist)")
}

// wire builds the bridge in the hub, this machine's address on it, and a
// namespace per member: its veth on the bridge with both its addresses,
// and its peers' addresses as aliases on its loopback (where its proxies
// listen).
func (r *Rig) wire() error {
	hub := r.hub()
	steps := [][]string{
		{"-n", hub, "link", "add", "br0", "type", "bridge"},
		{"-n", hub, "link", "set", "br0", "up"},
		{"-n", hub, "link", "set", "up0", "master", "br0", "up"},
		{"addr", "add", fmt.Sprintf("198.18.%d.254/24", r.slot), "dev", rootLink(r.slot)},
		{"link", "set", rootLink(r.slot), "up"},
	}
	for m := range r.n {
		ns, port := r.Namespace(m), fmt.Sprintf("p%d", m+1)
		steps = append(steps, []string{"netns", "add", ns},
			[]string{"-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", hub, "link", "set", port, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", r.Addr(m) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "addr", "add", r.inner(m) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"})
		for k := range r.n {
			if k != m {
				steps = append(steps, []string{"-n", ns, "addr", "add", r.Addr(k) + "/32", "dev", "lo"})
			}
		}
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	for m := range r.n {
		if err := quietARP(r.Namespace(m)); err != nil {
			return err
		}
	}
	return nil
}

// quietARP has namespace ns answer ARP only for the addresses of the
// interface asked on, and ask with those: its peers' aliases on its
// loopback must not answer for the peers on the bridge.
func quietARP(ns string) error {
	return inNamespace(ns, func() error {
		for f, v := range map[string]string{"arp_ignore": "1", "arp_announce": "2"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/"+f, []byte(v), 0o644); err != nil {
				return fmt.Errorf("netrig: %s in %s: %w", f, ns, err)
			}
		}
		return nil
	})
}

// startProxies starts netproxy in every member namespace, with a proxy per
// link out of it, and waits until each answers with all its proxies.
func (r *Rig) startProxies(ctx context.Context, bin string) error {
	for m := range r.n {
		args := []string{"netns", "exec", r.Namespace(m), bin, "-api", hostPort(r.Addr(m), apiPort)}
		for k := range r.n {
			if k != m {
				args = append(args, "-link", fmt.Sprintf("%s=%s=%s", Link{m, k}.name(), r.RaftAddr(k), hostPort(r.inner(k), raftPortBase+k)))
			}
		}
		logf, err := os.OpenFile(filepath.Join(r.dir, fmt.Sprintf("netproxy-n%d.log", m+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command("ip", args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("start netproxy in %s: %w", r.Namespace(m), err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
		r.mu.Lock()
		r.procs, r.done = append(r.procs, cmd), append(r.done, done)
		r.apis = append(r.apis, toxiclient.NewClient(hostPort(r.Addr(m), apiPort)))
		r.mu.Unlock()
	}
	for m := range r.n {
		if err := r.waitProxies(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// waitProxies polls member m's proxy API until it lists every link out of
// m (10 s at most).
func (r *Rig) waitProxies(ctx context.Context, m int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ps, err := r.apis[m].Proxies()
		if err == nil && len(ps) == r.n-1 {
			r.mu.Lock()
			for k := range r.n {
				if p, ok := ps[Link{m, k}.name()]; ok {
					r.proxies[Link{m, k}] = p
				}
			}
			r.mu.Unlock()
			return nil
		}
		last = err
		select {
		case <-r.done[m]:
			return fmt.Errorf("netproxy in %s exited (log %s)", r.Namespace(m), filepath.Join(r.dir, fmt.Sprintf("netproxy-n%d.log", m+1)))
		case <-ctx.Done():
			return fmt.Errorf("netproxy in %s not serving within 10s: %v", r.Namespace(m), last)
		case <-tick.C:
		}
	}
}

// Close kills the proxies and anything else still running in the rig's
// namespaces, deletes them, and waits (10 s at most) for the kernel to
// remove the rig's link from this machine's namespace. It is safe to call
// more than once.
func (r *Rig) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	procs, done := r.procs, r.done
	r.mu.Unlock()
	for i, p := range procs {
		_ = p.Process.Kill()
		<-done[i]
	}
	var errs []error
	names, err := namespaces()
	if err != nil {
		return err
	}
	for _, ns := range names {
		if !strings.HasPrefix(ns, r.prefix+"-") {
			continue
		}
		if err := killIn(ns); err != nil {
			errs = append(errs, err)
		}
		if err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, waitLinkGone(rootLink(r.slot), 10*time.Second))...)
}

// waitLinkGone polls until this namespace has no link named name: a
// deleted namespace's devices are removed by the kernel a moment later.
func waitLinkGone(name string, within time.Duration) error {
	deadline := time.After(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := net.InterfaceByName(name); err != nil {
			return nil
		}
		select {
		case <-deadline:
			return fmt.Errorf("netrig: link %s still present %v after its namespace was deleted", name, within)
		case <-tick.C:
		}
	}
}

// Prefix starts the name of every namespace of the rig.
func (r *Rig) Prefix() string { return r.prefix + "-" }
