package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// table prints aligned columns.
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer) *table { return &table{w: tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)} }

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.w, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

func printJSON(e *env, v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readAll reads a payload from r (at most 16 MiB).
func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, 16<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 16<<20 {
		return nil, usagef("payload above 16 MiB")
	}
	return b, nil
}
