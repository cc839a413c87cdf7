package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// Table summarizes runs: outcome counts, then per checker how many seeds
// it failed, with the first few failing seeds.
func Table(results []Result) string {
	var b strings.Builder
	pass := 0
	fails := map[string][]uint64{}
	for _, r := range results {
		cs := r.Checkers()
		if len(cs) == 0 {
			pass++
		}
		for _, c := range cs {
			fails[c] = append(fails[c], r.Schedule.Seed)
		}
	}
	fmt.Fprintf(&b, "%-14s %6s  %s\n", "outcome", "seeds", "")
	fmt.Fprintf(&b, "%-14s %6d\n", "PASS", pass)
	fmt.Fprintf(&b, "%-14s %6d\n", "FAIL", len(results)-pass)
	var names []string
	for c := range fails {
		names = append(names, c)
	}
	sort.Strings(names)
	if len(names) > 0 {
		fmt.Fprintf(&b, "%-14s %6s  %s\n", "checker", "failed", "seeds")
	}
	for _, c := range names {
		s := fails[c]
		show := s
		if len(show) > 10 {
			show = show[:10]
		}
		fmt.Fprintf(&b, "%-14s %6d  %v\n", c, len(s), show)
	}
	return b.String()
}
