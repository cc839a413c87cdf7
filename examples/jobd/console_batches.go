package main

import (
	"net/http"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/fsm"
)

// batchRow is a batch as the console's batches page shows it: its
// members by state, how many ended, and its completion.
type batchRow struct {
	jobraft.BatchInfo
	Ended, Percent int
}

// GET /console/batches[?id=ID]: every batch's progress (this member's
// state), or one batch's.
func (c *console) batchesPage(w http.ResponseWriter, r *http.Request, p *page) error {
	var bs []jobraft.BatchInfo
	if id := r.URL.Query().Get("id"); id != "" {
		b, err := c.s.ctl.Batch(r.Context(), id, jobraft.Local)
		if err != nil {
			return err
		}
		bs = append(bs, b)
	} else {
		var err error
		if bs, err = c.s.ctl.Batches(r.Context(), "", fsm.MaxListLimit, jobraft.Local); err != nil {
			return err
		}
	}
	rows := make([]batchRow, len(bs))
	for i, b := range bs {
		rows[i] = batchRow{BatchInfo: b, Ended: b.Counts.Succeeded + b.Failed()}
		if b.Members > 0 {
			rows[i].Percent = 100 * rows[i].Ended / b.Members
		} else {
			rows[i].Percent = 100
		}
	}
	p.Title, p.Nav = "Batches", "batches"
	p.Data = map[string]any{"Batches": rows}
	c.render(w, http.StatusOK, "batches", p)
	return nil
}
