package catchup

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// The scripts under testdata/ are catch-up scenarios as data, in the
// spirit of etcd-io/raft's datadriven tests: each case is one or more
// command lines, a "----" line, and the expected output (one line per
// command), ended by a blank line. Lines starting with # are comments.
//
//	policy election=300ms rounds=3 no-progress=4 unreachable=4 install-failures=3 refusals=3 near-lag=256
//	observe t=1s candidate|voter leader=N last=N [unreached] [installing]
//	        [install-bytes=N] [install-failures=N] [refusals=N] [diverged=INDEX/LOCAL/LEADER]
//
// policy starts a new member with a new Tracker (output "ok"); observe
// feeds one Observation at t (since the script's epoch) and prints the
// Decision. go test ./catchup -rewrite rewrites the expected outputs.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptCase struct {
	line    int
	cmds    []string
	want    []string
	comment []string // comment and blank lines before the case
}

func parseScript(t *testing.T, path string) ([]scriptCase, []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var cases []scriptCase
	var pre []string
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			i++
			continue
		}
		c := scriptCase{line: i + 1, comment: pre}
		pre = nil
		for ; i < len(lines) && lines[i] != "----"; i++ {
			c.cmds = append(c.cmds, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: no ---- after the commands", path, c.line)
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			c.want = append(c.want, lines[i])
		}
		cases = append(cases, c)
	}
	return cases, pre
}

func runScript(t *testing.T, path string) {
	cases, tail := parseScript(t, path)
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tr *Tracker
	var out strings.Builder
	for ci, c := range cases {
		var got []string
		for _, cmd := range c.cmds {
			fields := strings.Fields(cmd)
			switch fields[0] {
			case "policy":
				tr = NewTracker(parsePolicy(t, path, c.line, fields[1:]))
				got = append(got, "ok")
			case "observe":
				if tr == nil {
					t.Fatalf("%s:%d: observe before policy", path, c.line)
				}
				at, o := parseObservation(t, path, c.line, fields[1:])
				got = append(got, tr.Decide(epoch.Add(at), o).String())
			default:
				t.Fatalf("%s:%d: unknown command %q", path, c.line, fields[0])
			}
		}
		if !*rewrite && strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:%d:\n%s\ngot:\n%s\nwant:\n%s", path, c.line, strings.Join(c.cmds, "\n"), strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
		for _, l := range c.comment {
			out.WriteString(l + "\n")
		}
		out.WriteString(strings.Join(c.cmds, "\n") + "\n----\n" + strings.Join(got, "\n") + "\n")
		if ci == len(cases)-1 {
			for _, l := range tail {
				out.WriteString(l + "\n")
			}
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func kv(t *testing.T, path string, line int, f string) (string, string) {
	k, v, ok := strings.Cut(f, "=")
	if !ok {
		t.Fatalf("%s:%d: %q is not key=value", path, line, f)
	}
	return k, v
}

func num(t *testing.T, path string, line int, k, v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s:%d: %s: %v", path, line, k, err)
	}
	return n
}

func dur(t *testing.T, path string, line int, k, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s:%d: %s: %v", path, line, k, err)
	}
	return d
}

func parsePolicy(t *testing.T, path string, line int, fields []string) Policy {
	var p Policy
	for _, f := range fields {
		k, v := kv(t, path, line, f)
		switch k {
		case "election":
			p.ElectionTimeout = dur(t, path, line, k, v)
		case "rounds":
			p.MaxRounds = int(num(t, path, line, k, v))
		case "no-progress":
			p.NoProgressRounds = int(num(t, path, line, k, v))
		case "unreachable":
			p.UnreachableRounds = int(num(t, path, line, k, v))
		case "install-failures":
			p.InstallFailures = int(num(t, path, line, k, v))
		case "refusals":
			p.GuardRefusals = int(num(t, path, line, k, v))
		case "near-lag":
			p.NearLag = num(t, path, line, k, v)
		default:
			t.Fatalf("%s:%d: unknown policy key %q", path, line, k)
		}
	}
	return p
}

func parseObservation(t *testing.T, path string, line int, fields []string) (time.Duration, Observation) {
	o := Observation{Reached: true}
	var at time.Duration
	for _, f := range fields {
		switch f {
		case "candidate":
			o.Candidate = true
			continue
		case "voter":
			o.Voter = true
			continue
		case "unreached":
			o.Reached = false
			continue
		case "installing":
			o.Installing = true
			continue
		}
		k, v := kv(t, path, line, f)
		switch k {
		case "t":
			at = dur(t, path, line, k, v)
		case "leader":
			o.LeaderLast = num(t, path, line, k, v)
		case "commit":
			o.LeaderCommit = num(t, path, line, k, v)
		case "last":
			o.LastIndex = num(t, path, line, k, v)
		case "install-bytes":
			o.InstallBytes = num(t, path, line, k, v)
		case "install-remaining":
			o.InstallRemaining = num(t, path, line, k, v)
		case "install-failures":
			o.InstallFailures = num(t, path, line, k, v)
		case "refusals":
			o.GuardRefusals = num(t, path, line, k, v)
		case "diverged":
			var d Divergence
			if _, err := fmt.Sscanf(v, "%d/%d/%d", &d.Index, &d.LocalTerm, &d.LeaderTerm); err != nil {
				t.Fatalf("%s:%d: diverged=%q: %v", path, line, v, err)
			}
			o.Diverged = &d
		default:
			t.Fatalf("%s:%d: unknown observation key %q", path, line, k)
		}
	}
	return at, o
}
