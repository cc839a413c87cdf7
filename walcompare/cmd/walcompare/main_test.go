package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/wal"
	"github.com/jobraft/jobraft/wal/segment"
)

const secret = "SECRET-PAYLOAD-"

// member writes entries 1..tip (term 1) through the real log, with the body
// of index odd replaced by a different one (same term) when odd > 0.
func member(t *testing.T, dir string, tip, floor, odd uint64) {
	t.Helper()
	l, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var f uint64
	l.SetCommitFloor(func() uint64 { return f })
	for ix := uint64(1); ix <= tip; ix++ {
		data := []byte(secret + "common")
		if ix == odd {
			data = []byte(secret + "other!")
		}
		e := &raft.Log{Index: ix, Term: 1, Type: raft.LogCommand, Data: data}
		segment.Stamp(e)
		if err := l.StoreLogs([]*raft.Log{e}); err != nil {
			t.Fatal(err)
		}
		f = min(floor, ix)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	if strings.Contains(out.String(), secret) || strings.Contains(errb.String(), secret) {
		t.Fatalf("payload bytes printed:\n%s%s", out.String(), errb.String())
	}
	return code, out.String(), errb.String()
}

func fixture(t *testing.T, odd uint64) (a, b, c string) {
	base := t.TempDir()
	a, b, c = filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	member(t, a, 12, 10, 0)
	member(t, b, 12, 10, 0)
	member(t, c, 9, 9, odd)
	return
}

func TestExitZeroWhenOnlyLag(t *testing.T) {
	a, b, c := fixture(t, 0)
	code, out, errs := runCLI(t, a, b, c)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	for _, want := range []string{"compared [1, 13)", "committed boundary: 10 (floors)", "[10,13)", "missing", "committed divergences: 0", "summary: same=12"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestExitOneOnCommittedDivergenceTable(t *testing.T) {
	a, b, c := fixture(t, 5)
	code, out, errs := runCLI(t, a, b, c)
	if code != 1 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "5 ") {
			row = l
		}
	}
	for _, want := range []string{"payload-mismatch", "YES", "same t1", "len=21", "crc="} {
		if !strings.Contains(row, want) {
			t.Fatalf("row %q lacks %q:\n%s", row, want, out)
		}
	}
	if !strings.Contains(out, "committed divergences: 1") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestJSONSchema(t *testing.T) {
	a, b, c := fixture(t, 5)
	code, out, _ := runCLI(t, "--json", "--committed", "13", a, b, c)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var r struct {
		Members []struct {
			Name, Source string
			First, Last  uint64
			Floor        uint64
			HasFloor     bool `json:"has_floor"`
		}
		From, End, To  uint64
		Committed      uint64
		CommittedBasis string `json:"committed_basis"`
		Proof          string
		Held           uint64
		OverClaimed    bool `json:"over_claimed"`
		Divergences    []struct {
			Index, End uint64
			Class      string
			Committed  bool
			Member     string
			Views      []struct {
				Class    string
				Present  bool
				Term     uint64
				Len, CRC uint32
			}
		}
		Summary              map[string]uint64
		CommittedDivergences int `json:"committed_divergences"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Members) != 3 || r.Members[2].Name != "c" || r.Members[2].Source != "wal" || !r.Members[2].HasFloor || r.Members[2].Last != 9 {
		t.Fatalf("members %+v", r.Members)
	}
	if r.Committed != 13 || r.CommittedBasis != "supplied" || !r.OverClaimed || r.Held != 12 || r.Proof == "" || r.From != 1 || r.End != 13 || r.To != 12 {
		t.Fatalf("boundary %+v", r)
	}
	if len(r.Divergences) != 2 || r.CommittedDivergences != 1 {
		t.Fatalf("divergences %+v", r.Divergences)
	}
	d := r.Divergences[0]
	if d.Index != 5 || d.End != 6 || d.Class != "payload-mismatch" || !d.Committed || len(d.Views) != 3 ||
		d.Views[2].Class != "payload-mismatch" || !d.Views[2].Present || d.Views[2].Term != 1 || d.Views[2].Len != 21 || d.Views[2].CRC == d.Views[0].CRC {
		t.Fatalf("divergence %+v", d)
	}
	if m := r.Divergences[1]; m.Index != 10 || m.End != 13 || m.Class != "missing" || m.Member != "c" || m.Committed {
		t.Fatalf("run %+v", m)
	}
	for _, k := range []string{"same", "missing", "compacted", "term-mismatch", "payload-mismatch", "payload-lost", "corrupt"} {
		if _, ok := r.Summary[k]; !ok {
			t.Fatalf("summary lacks %s: %v", k, r.Summary)
		}
	}
	if r.Summary["payload-mismatch"] != 1 || r.Summary["missing"] != 3 || r.Summary["same"] != 11 {
		t.Fatalf("summary %v", r.Summary)
	}
}

// TestFromTo: --from and --to are both included; the report prints the
// compared range half-open.
func TestFromTo(t *testing.T) {
	a, b, c := fixture(t, 5)
	code, out, _ := runCLI(t, "--from", "6", "--to", "9", a, b, c)
	if code != 0 || !strings.Contains(out, "compared [6, 10)") || !strings.Contains(out, "no divergences") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The bounds are included: index 5 (a committed payload mismatch) is
	// compared with --from 5 and with --to 5.
	for _, args := range [][]string{{"--from", "5", "--to", "9"}, {"--from", "1", "--to", "5"}, {"--from", "5", "--to", "5"}} {
		code, out, _ := runCLI(t, append(args, a, b, c)...)
		if code != 1 || !strings.Contains(out, "committed divergences: 1") {
			t.Fatalf("%v: exit %d:\n%s", args, code, out)
		}
	}
	// The proof and the over-claim print the held prefix half-open.
	_, out, _ = runCLI(t, "--committed", "4", a, b, c)
	if !strings.Contains(out, "a majority (2 of 3) holds [1, 5) identically") {
		t.Fatalf("output:\n%s", out)
	}
	_, out, _ = runCLI(t, "--committed", "13", a, b, c)
	if !strings.Contains(out, "OVER-CLAIMED: only [1, 13) is held identically by a majority") ||
		!strings.Contains(out, "OVER-CLAIMED: a majority holds only [1, 13) identically") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestErrorsExitTwo(t *testing.T) {
	a, _, _ := fixture(t, 0)
	empty := t.TempDir()
	notes := filepath.Join(empty, "notes.txt")
	if err := os.WriteFile(notes, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"no members":    {},
		"bad flag":      {"--bogus", a},
		"missing dir":   {filepath.Join(empty, "nope")},
		"not a log":     {a, empty},
		"not bolt":      {notes},
		"to below from": {"--from", "5", "--to", "2", a},
		"tls half":      {"--tls-ca", notes, a},
		"unreachable":   {"127.0.0.1:1"},
	} {
		code, out, errs := runCLI(t, args...)
		if code != 2 || errs == "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q", name, code, errs, out)
		}
	}
}
