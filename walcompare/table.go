package walcompare

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes r as a readable table: members, the boundary and its
// proof, every divergence (per member: class, term, length, CRC; never
// payload bytes) and the summary counts.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "MEMBER\tSOURCE\tFIRST\tLAST\tFLOOR\tWHERE\n")
	for _, m := range r.Members {
		floor := "-"
		if m.HasFloor {
			floor = fmt.Sprint(m.Floor)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", m.Name, m.Source, m.First, m.Last, floor, m.Where)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Members {
		if m.Torn != "" {
			fmt.Fprintf(w, "%s: torn tail (unacknowledged write, not damage): %s\n", m.Name, m.Torn)
		}
		for _, n := range m.Notes {
			fmt.Fprintf(w, "%s: %s\n", m.Name, n)
		}
	}
	fmt.Fprintf(w, "\ncompared [%d, %d) (%s mode", r.From, r.End, r.Mode)
	if r.Calls > 0 {
		fmt.Fprintf(w, ", %d calls", r.Calls)
	}
	fmt.Fprintf(w, ")\ncommitted boundary: %d (%s)\n  proof: %s\n", r.Committed, r.CommittedBasis, r.Proof)
	if r.OverClaimed {
		fmt.Fprintf(w, "  OVER-CLAIMED: a majority holds only [1, %d) identically\n", r.Held+1)
	}
	fmt.Fprintln(w)
	if len(r.Divergences) == 0 {
		fmt.Fprintln(w, "no divergences")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		hdr := []string{"INDEX", "CLASS", "COMMITTED"}
		for _, m := range r.Members {
			hdr = append(hdr, m.Name)
		}
		fmt.Fprintln(tw, strings.Join(hdr, "\t"))
		for _, d := range r.Divergences {
			row := []string{fmt.Sprint(d.Index), string(d.Class), committedText(d)}
			if d.Member != "" {
				row[0] = fmt.Sprintf("[%d,%d)", d.Index, d.End)
				for _, m := range r.Members {
					if m.Name == d.Member {
						row = append(row, string(d.Class))
					} else {
						row = append(row, "")
					}
				}
			} else {
				for _, v := range d.Views {
					row = append(row, viewText(v))
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nsummary:")
	for _, c := range Classes {
		fmt.Fprintf(w, " %s=%d", c, r.Summary[c])
	}
	_, err := fmt.Fprintf(w, "\ncommitted divergences: %d\n", r.CommittedCount)
	return err
}

func committedText(d Divergence) string {
	switch {
	case d.Committed:
		return "YES"
	case d.Tail:
		return "tail"
	}
	return "no"
}

// viewText renders one member's view: class, term, type, length and CRC.
func viewText(v View) string {
	if !v.Present {
		return string(v.Class)
	}
	s := fmt.Sprintf("%s t%d %s len=%d crc=%08x", v.Class, v.Term, v.Type, v.Len, v.CRC)
	if v.Stamped && (v.StampLen != v.Len || v.StampCRC != v.CRC) {
		s += fmt.Sprintf(" stamp=%d/%08x", v.StampLen, v.StampCRC)
	}
	if v.Detail != "" {
		s += " (" + v.Detail + ")"
	}
	return s
}
