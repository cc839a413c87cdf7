package chaos

import (
	"fmt"
	"html"
	"strings"
	"time"
)

// picture draws a run as one HTML page holding an SVG: one lane per member
// (role and term over time, commit and applied index as lines), the
// schedule's faults as shaded bands on the lanes they hit (cluster-wide
// ones across all lanes), client operations as ticks under the lanes
// (green ok, red refused, grey unknown), the final phase's start, and the
// checkers' verdicts with where a failure was seen.
func (r *runner) picture(res Result) []byte {
	samples := r.obs.all()
	ops := r.wl.all()
	r.mu.Lock()
	events := append([]Event(nil), r.events...)
	r.mu.Unlock()
	var end time.Duration // the last status round (the final checks after it draw nothing)
	for _, s := range samples {
		end = max(end, s.At+pollEvery)
	}
	for _, op := range ops {
		end = max(end, op.Call)
	}
	const (
		left, width    = 90.0, 1100.0
		laneH, laneGap = 70.0, 12.0
	)
	n := r.s.Slots()
	x := func(t time.Duration) float64 { return left + width*float64(t)/float64(max(end, 1)) }
	laneY := func(m int) float64 { return 30 + float64(m)*(laneH+laneGap) }
	opsY := laneY(n) + 4
	height := opsY + 60
	var maxIdx uint64 = 1
	for _, s := range samples {
		maxIdx = max(maxIdx, s.Commit, s.Applied)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><meta charset=utf-8><title>chaos seed %d</title>\n", r.s.Seed)
	b.WriteString("<style>body{font:13px sans-serif} pre{background:#f6f6f6;padding:6px} .fail{color:#b00} .ok{color:#070}</style>\n")
	fmt.Fprintf(&b, "<h2>chaos seed %d: %s</h2>\n", r.s.Seed, verdictWord(res))
	fmt.Fprintf(&b, "<svg width=%.0f height=%.0f xmlns='http://www.w3.org/2000/svg' style='border:1px solid #ccc'>\n", left+width+20, height)
	// time axis
	for t := time.Duration(0); t <= end; t += 500 * time.Millisecond {
		fmt.Fprintf(&b, "<line x1=%.1f y1=20 x2=%.1f y2=%.1f stroke='#eee'/><text x=%.1f y=14 font-size=10>%s</text>\n", x(t), x(t), height, x(t)-8, t)
	}
	// fault bands
	for _, a := range r.effective().Actions {
		color := map[Kind]string{Kill: "#f88", Pause: "#fc8", Partition: "#88f", Bridge: "#aaf", OneWay: "#ccf", Mute: "#ddf", Flap: "#c8f",
			Net: "#8cc", Fsync: "#cc8", DiskFull: "#aa6", BitFlip: "#f4f", Skew: "#8f8", Transfer: "#555",
			Stall: "#cb8", Lie: "#f60", PowerLoss: "#c00", Add: "#3a3", Remove: "#a33", Replace: "#a3a"}[a.Kind]
		lanes := a.Members
		if a.Kind == Net || a.Kind == Transfer || len(lanes) == 0 {
			lanes = nil
			for m := 0; m < n; m++ {
				lanes = append(lanes, m)
			}
		}
		w := max(x(a.End())-x(a.At), 2)
		for _, m := range lanes {
			fmt.Fprintf(&b, "<rect x=%.1f y=%.1f width=%.1f height=%.1f fill='%s' opacity=0.35><title>%s</title></rect>\n",
				x(a.At), laneY(m), w, laneH, color, html.EscapeString(a.String()))
		}
	}
	// lanes: role strip, term label on change, commit/applied lines
	for m := 0; m < n; m++ {
		y := laneY(m)
		fmt.Fprintf(&b, "<text x=4 y=%.1f>m%d</text><rect x=%.0f y=%.1f width=%.0f height=%.0f fill=none stroke='#999'/>\n", y+laneH/2, m, left, y, width, laneH)
		var prev *Sample
		var commit, applied []string
		for i := range samples {
			s := &samples[i]
			if s.Member != m {
				continue
			}
			if prev != nil {
				fill := map[string]string{"Leader": "#2a2", "Follower": "#bbb", "Candidate": "#e90"}[prev.Role]
				if !prev.OK {
					fill = "#fff"
				}
				fmt.Fprintf(&b, "<rect x=%.1f y=%.1f width=%.1f height=8 fill='%s'/>\n", x(prev.At), y+2, max(x(s.At)-x(prev.At), 0.5), fill)
				if s.OK && s.Term != prev.Term {
					fmt.Fprintf(&b, "<text x=%.1f y=%.1f font-size=9>t%d</text>\n", x(s.At), y+20, s.Term)
				}
			}
			if s.OK {
				yi := func(v uint64) float64 { return y + laneH - 2 - (laneH-26)*float64(v)/float64(maxIdx) }
				commit = append(commit, fmt.Sprintf("%.1f,%.1f", x(s.At), yi(s.Commit)))
				applied = append(applied, fmt.Sprintf("%.1f,%.1f", x(s.At), yi(s.Applied)))
			}
			prev = s
		}
		fmt.Fprintf(&b, "<polyline points='%s' fill=none stroke='#36c' stroke-width=1.5><title>commit index</title></polyline>\n", strings.Join(commit, " "))
		fmt.Fprintf(&b, "<polyline points='%s' fill=none stroke='#c63' stroke-width=1 stroke-dasharray='3,2'><title>applied index</title></polyline>\n", strings.Join(applied, " "))
	}
	// client operations
	fmt.Fprintf(&b, "<text x=4 y=%.1f>clients</text>\n", opsY+20)
	for _, op := range ops {
		color := "#2a2"
		switch op.Outcome {
		case noReply, "may_exist":
			color = "#999"
		case "ok":
		default:
			color = "#c22"
		}
		y := opsY + float64(op.Client%5)*10
		fmt.Fprintf(&b, "<line x1=%.1f y1=%.1f x2=%.1f y2=%.1f stroke='%s'><title>%s %s %s</title></line>\n",
			x(op.Call), y, x(op.Call), y+8, color, op.Kind, html.EscapeString(op.Job), op.Outcome)
	}
	// failures
	for _, v := range res.Failed() {
		fmt.Fprintf(&b, "<line x1=%.1f y1=20 x2=%.1f y2=%.1f stroke='#b00' stroke-width=2><title>%s</title></line>\n", x(v.At), x(v.At), height, html.EscapeString(v.String()))
	}
	b.WriteString("</svg>\n<p>Lanes: role strip (green leader, grey follower, orange candidate, white no answer), term labels, commit (blue) and applied (dashed) index; shaded bands: faults (hover for the action); ticks: client operations (green ok, red refused, grey unknown); red lines: failures.</p>\n")
	b.WriteString("<h3>Verdicts</h3><ul>\n")
	for _, v := range res.Verdicts {
		cls := "ok"
		if !v.OK {
			cls = "fail"
		}
		fmt.Fprintf(&b, "<li class=%s>%s</li>\n", cls, html.EscapeString(v.String()))
	}
	fmt.Fprintf(&b, "</ul><h3>Schedule</h3><pre>%s</pre><h3>Events</h3><pre>", html.EscapeString(r.s.String()))
	for _, e := range events {
		fmt.Fprintf(&b, "%8s m%d %s\n", e.At.Round(time.Millisecond), e.Member, html.EscapeString(e.What))
	}
	b.WriteString("</pre>\n")
	return []byte(b.String())
}

func verdictWord(res Result) string {
	if f := res.Checkers(); len(f) > 0 {
		return "FAIL " + strings.Join(f, ",")
	}
	return "PASS"
}
