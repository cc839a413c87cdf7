package main

import (
	"fmt"
	"strings"
	"time"
)

// table prints every figure per size, each next to the baseline's ratio.
func (rep report) table() string {
	var b strings.Builder
	if len(rep.Sizes) == 0 {
		return "nothing measured\n"
	}
	base := rep.Sizes[0]
	fmt.Fprintf(&b, "| backlog (pending jobs) |")
	for _, s := range rep.Sizes {
		fmt.Fprintf(&b, " %s |", sizeName(s.N))
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(rep.Sizes)))
	row := func(name string, cell func(s sizeResult) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, s := range rep.Sizes {
			fmt.Fprintf(&b, " %s |", cell(s))
		}
		b.WriteString("\n")
	}
	// vs: a figure with its ratio to the baseline's (not for the baseline).
	vs := func(s sizeResult, text string, v, b float64) string {
		if s.N == base.N || b == 0 || v == 0 {
			return text
		}
		return fmt.Sprintf("%s (%.2f×)", text, v/b)
	}
	rate := func(get func(sizeResult) result) func(sizeResult) string {
		return func(s sizeResult) string {
			return vs(s, thousands(get(s).Rate)+"/s", get(s).Rate, get(base).Rate)
		}
	}
	lat := func(get func(sizeResult) time.Duration) func(sizeResult) string {
		return func(s sizeResult) string { return vs(s, ms(get(s)), float64(get(s)), float64(get(base))) }
	}
	cpu := func(get func(sizeResult) time.Duration) func(sizeResult) string {
		return func(s sizeResult) string { return vs(s, us(get(s)), float64(get(s)), float64(get(base))) }
	}
	row("preload (SubmitBatch through raft)", func(s sizeResult) string {
		if s.N == 0 {
			return "-"
		}
		return fmt.Sprintf("%s (%s/s)", secs(s.Preload), thousands(float64(s.N)/s.Preload.Seconds()))
	})
	row("Submit, C=64", rate(func(s sizeResult) result { return s.Submit }))
	row("Submit p99", lat(func(s sizeResult) time.Duration { return s.Submit.P99 }))
	row(fmt.Sprintf("CPU per Submit (process, %d member%s)", rep.members(), plural(rep.members())), cpu(func(s sizeResult) time.Duration { return s.Submit.CPU }))
	row("cycle (submit, claim, ack), C=64", rate(func(s sizeResult) result { return s.Cycle }))
	row("cycle p99", lat(func(s sizeResult) time.Duration { return s.Cycle.P99 }))
	row("CPU per cycle", cpu(func(s sizeResult) time.Duration { return s.Cycle.CPU }))
	row("claim p50", lat(func(s sizeResult) time.Duration { return s.Cycle.ClaimP50 }))
	row("claim p99", lat(func(s sizeResult) time.Duration { return s.Cycle.ClaimP99 }))
	row("a member's heap after GC (jobs held)", func(s sizeResult) string {
		return fmt.Sprintf("%s MB (%s)", mb(float64(s.MemberHeap)), thousands(float64(s.Jobs)))
	})
	row("heap per job beyond its payload", func(s sizeResult) string {
		if s.N == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f B", s.PerJob)
	})
	row("snapshot (leader): time, size", func(s sizeResult) string {
		return fmt.Sprintf("%s, %s MB", s.Snapshot, mb(float64(s.SnapshotSize)))
	})
	row("restart: Open (snapshot restore)", func(s sizeResult) string { return secs(s.RestartOpen) })
	row("restart: caught up (+ log replay)", func(s sizeResult) string { return s.Restart.String() })
	row("Controller.Backup: time, size", func(s sizeResult) string {
		if s.Backup.Wall == 0 {
			return "skipped"
		}
		return fmt.Sprintf("%s, %s MB", s.Backup, mb(float64(s.BackupSize)))
	})
	row("heap growth while it ran: live after a GC, all objects (peaks)", func(s sizeResult) string {
		if s.Backup.Wall == 0 {
			return "skipped"
		}
		return mb(float64(s.BackupLive)) + " MB, " + mb(float64(s.BackupHeap)) + " MB"
	})
	row("Restore (verify + seed)", func(s sizeResult) string { return s.Restore.String() })
	row("disk: write + fsync, snapshot's size", func(s sizeResult) string { return mb(s.DiskRate) + " MB/s" })
	row("new member: snapshot stream (to its last byte)", func(s sizeResult) string { return ofDisk(s.StreamRate, s.DiskRate) })
	row("new member: install (stream, the member's seal and restore)", func(s sizeResult) string { return ofDisk(s.InstallRate, s.DiskRate) })
	row("new member: promoted after", func(s sizeResult) string {
		if s.JoinErr != "" {
			return "not promoted after " + s.Promoted.String()
		}
		return s.Promoted.String()
	})
	row("Submits meanwhile (target: half the Submit rate)", func(s sizeResult) string {
		if s.Promoted.Wall == 0 {
			return "-"
		}
		return fmt.Sprintf("%s/s (%s/s before; target %s/s)", thousands(s.LoadKept), thousands(s.LoadBefore), thousands(s.LoadTarget))
	})
	// Notes, a paragraph each.
	for _, s := range rep.Sizes {
		for _, k := range s.Skipped {
			fmt.Fprintf(&b, "\n%s: skipped %s\n", sizeName(s.N), k)
		}
		if s.JoinErr != "" {
			fmt.Fprintf(&b, "\n%s: the new member was not promoted: %s\n", sizeName(s.N), s.JoinErr)
		}
	}
	for _, n := range rep.Skipped {
		fmt.Fprintf(&b, "\n%s: skipped (would not fit in the memory available)\n", sizeName(n))
	}
	if a := rep.Again; a != nil {
		fmt.Fprintf(&b, "\nThe empty backlog again, at the end of the run: Submit %s/s (p99 %s, CPU %s), cycle %s/s (p99 %s, CPU %s), claim p50 %s, p99 %s.\n",
			thousands(a.Submit.Rate), ms(a.Submit.P99), us(a.Submit.CPU), thousands(a.Cycle.Rate), ms(a.Cycle.P99), us(a.Cycle.CPU), ms(a.Cycle.ClaimP50), ms(a.Cycle.ClaimP99))
	}
	if f := rep.Fanout; f != nil {
		fmt.Fprintf(&b, "\n| cycles, C=64 | 1 queue, 1 kind (empty backlog) | many queues, a cycle on a random one | many kinds in one queue, claims by kind |\n|---|---|---|---|\n")
		c := base.Cycle
		fmt.Fprintf(&b, "| rate | %s/s | %s/s (%.2f×) | %s/s (%.2f×) |\n", thousands(c.Rate), thousands(f.Queues.Rate), f.Queues.Rate/c.Rate, thousands(f.Kinds.Rate), f.Kinds.Rate/c.Rate)
		for _, p := range []struct {
			name string
			get  func(result) time.Duration
			f    func(time.Duration) string
		}{
			{"CPU per cycle", func(r result) time.Duration { return r.CPU }, us},
			{"claim p50", func(r result) time.Duration { return r.ClaimP50 }, ms},
			{"claim p99", func(r result) time.Duration { return r.ClaimP99 }, ms},
		} {
			q, k, bb := p.get(f.Queues), p.get(f.Kinds), p.get(c)
			fmt.Fprintf(&b, "| %s | %s | %s (%.2f×) | %s (%.2f×) |\n", p.name, p.f(bb), p.f(q), float64(q)/float64(bb), p.f(k), float64(k)/float64(bb))
		}
	}
	return b.String()
}

// sizeName: 0, 10k, 1M, 2.5M.
func sizeName(n int) string {
	switch {
	case n < 0:
		return "fanout"
	case n >= 1e6:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", float64(n)/1e6), "0"), ".0") + "M"
	case n >= 1e3:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", float64(n)/1e3), "0"), ".0") + "k"
	}
	return fmt.Sprint(n)
}

// thousands formats v rounded, with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func mb(v float64) string { return fmt.Sprintf("%.1f", v/1e6) }

// ofDisk formats a rate and its share of the disk's write rate ("-": none).
func ofDisk(rate, disk float64) string {
	if rate == 0 {
		return "-"
	}
	return fmt.Sprintf("%s MB/s (%.0f%% of disk)", mb(rate), 100*rate/disk)
}
