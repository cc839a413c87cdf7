package chaos

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
)

// WriteIndex writes dir/index.html: one row per run (seed, outcome,
// failing checkers, members, actions, wall time, a link to its picture),
// then the summary table. It returns the page's path.
func WriteIndex(dir string, results []Result) (string, error) {
	var b strings.Builder
	b.WriteString("<!doctype html><meta charset=utf-8><title>chaos runs</title><style>body{font:13px sans-serif} td{padding:2px 8px} .FAIL{color:#b00}</style>\n")
	fmt.Fprintf(&b, "<h2>%d chaos runs</h2><pre>%s</pre><table><tr><th>seed<th>outcome<th>members<th>actions<th>ops<th>wall<th>picture\n", len(results), html.EscapeString(Table(results)))
	for _, r := range results {
		word := "PASS"
		if f := r.Checkers(); len(f) > 0 {
			word = "FAIL " + strings.Join(f, ",")
		}
		link := ""
		if r.Picture != "" {
			rel, err := filepath.Rel(dir, r.Picture)
			if err != nil {
				rel = r.Picture
			}
			link = fmt.Sprintf("<a href='%s'>picture</a>", html.EscapeString(rel))
		}
		fmt.Fprintf(&b, "<tr><td>%d<td class=%s>%s<td>%d<td>%d<td>%d<td>%s<td>%s\n", r.Schedule.Seed, word[:4], html.EscapeString(word),
			r.Schedule.Members, len(r.Schedule.Actions), r.Ops, r.Wall.Round(1e8), link)
	}
	b.WriteString("</table>\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "index.html")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}
