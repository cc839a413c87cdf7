package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tiny run (part of `make test`, so the scale benchmark never rots):
// the baseline and a 10k backlog, 100 queues and 10 kinds, half-second
// windows. Every phase measures something, the table holds every row with
// the 10k column's ratios, and the plot is a PNG.
func TestTinyRun(t *testing.T) {
	cfg := config{Sizes: []int{0, 10_000}, Clients: 64, Warm: 200 * time.Millisecond, D: 500 * time.Millisecond, Payload: 256,
		Queues: 100, PerQueue: 3, Kinds: 10, PerKind: 10, Dir: t.TempDir(), Members: 3}
	rep, err := run(cfg, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 || rep.Sizes[1].N != 10_000 || rep.Fanout == nil {
		t.Fatalf("measured %+v", rep)
	}
	for _, s := range rep.Sizes {
		ok := s.Submit.Ops > 0 && s.Cycle.Ops > 0 && s.Cycle.ClaimP99 > 0 && s.Cycle.ClaimP99 >= s.Cycle.ClaimP50 &&
			s.Jobs >= s.N && s.MemberHeap > uint64(s.Jobs*cfg.Payload) && s.SnapshotSize > 0 && s.Restart.Wall >= s.RestartOpen && s.RestartOpen > 0 && s.Submit.CPU > 0 &&
			s.BackupSize > 0 && s.Restore.Wall > 0 && s.DiskRate > 0 && s.Promoted.Wall > 0 && s.JoinErr == "" && len(s.Skipped) == 0
		if !ok {
			t.Errorf("size %d: a phase measured nothing: %+v", s.N, s)
		}
	}
	if f := rep.Fanout; f.Queues.Ops == 0 || f.Kinds.Ops == 0 {
		t.Errorf("fanout: %+v", f)
	}
	tab := rep.table()
	t.Log("\n" + tab)
	for _, want := range []string{"| backlog (pending jobs) | 0 | 10k |", "| Submit, C=64 |", "| claim p99 |", "| heap per job beyond its payload |",
		"| restart: Open (snapshot restore) |", "| Controller.Backup: time, size |", "| new member: promoted after |", "| claim p99 | "} {
		if !strings.Contains(tab, want) {
			t.Errorf("table without %q", want)
		}
	}
	if n := strings.Count(tab, "×)"); n < 9 { // the 10k column's 7 ratios, and fanout's
		t.Errorf("table with %d ratios, want at least 9:\n%s", n, tab)
	}
	// The plot, drawn again from the figures' JSON (-json, -replot).
	dir := t.TempDir()
	js, png := filepath.Join(dir, "scale.json"), filepath.Join(dir, "scale.png")
	b, err := json.Marshal(rep)
	if err == nil {
		err = os.WriteFile(js, b, 0o644)
	}
	if err == nil {
		err = redraw(js, png)
	}
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(png)
	if err != nil || len(img) < 1000 || string(img[1:4]) != "PNG" {
		t.Fatalf("plot: %d bytes, %v", len(img), err)
	}
}

// -members 1 (a backlog whose three states do not fit in memory): every
// phase measures one member, its restart included (reopened alone, it
// leads again and applies what it had), and the table says so.
func TestTinyRunOneMember(t *testing.T) {
	cfg := config{Sizes: []int{0, 10_000}, Clients: 16, Warm: 100 * time.Millisecond, D: 300 * time.Millisecond, Payload: 256, Dir: t.TempDir(), Members: 1}
	rep, err := run(cfg, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 || rep.Members != 1 || rep.Fanout != nil {
		t.Fatalf("measured %+v", rep)
	}
	s := rep.Sizes[1]
	if !(s.Submit.Ops > 0 && s.Cycle.Ops > 0 && s.Jobs >= s.N && s.MemberHeap > uint64(s.Jobs*cfg.Payload) && s.SnapshotSize > 0 &&
		s.Restart.Wall >= s.RestartOpen && s.RestartOpen > 0 && s.BackupSize > 0 && s.Restore.Wall > 0 && s.Promoted.Wall > 0 && s.JoinErr == "") {
		t.Errorf("a phase measured nothing: %+v", s)
	}
	if tab := rep.table(); !strings.Contains(tab, "| CPU per Submit (process, 1 member) |") {
		t.Errorf("the table does not say one member:\n%s", tab)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("0, 1e6,3e6,1e7")
	if err != nil || len(got) != 4 || got[0] != 0 || got[1] != 1_000_000 || got[3] != 10_000_000 {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, _ := parseSizes("1e4"); len(got) != 2 || got[0] != 0 {
		t.Fatalf("the baseline not first: %v", got)
	}
	for _, bad := range []string{"x", "-1", "1.5", "1e12"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for n, want := range map[int]string{0: "0", 10_000: "10k", 1_000_000: "1M", 2_500_000: "2.5M", 10_000_000: "10M"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
}
