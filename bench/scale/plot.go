package main

import (
	"fmt"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writePlot draws three panels against the backlog (millions of pending
// jobs): Submit and cycle rates; the p99s of Submit, cycle and claim; the
// CPU per Submit and per cycle; written as a PNG to path.
func writePlot(path string, members int, sizes []sizeResult) error {
	points := func(y func(sizeResult) float64) plotter.XYs {
		xy := make(plotter.XYs, len(sizes))
		for i, s := range sizes {
			xy[i].X, xy[i].Y = float64(s.N)/1e6, y(s)
		}
		return xy
	}
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	usOf := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	rates, err := panel(fmt.Sprintf("jobraft at scale: rates (%d member%s, C=64, fsync on)", members, plural(members)), "operations per second",
		"Submit", points(func(s sizeResult) float64 { return s.Submit.Rate }),
		"cycle (submit, claim, ack)", points(func(s sizeResult) float64 { return s.Cycle.Rate }))
	if err != nil {
		return err
	}
	p99, err := panel("p99 latency", "milliseconds",
		"Submit p99", points(func(s sizeResult) float64 { return msOf(s.Submit.P99) }),
		"cycle p99", points(func(s sizeResult) float64 { return msOf(s.Cycle.P99) }),
		"claim p99", points(func(s sizeResult) float64 { return msOf(s.Cycle.ClaimP99) }))
	if err != nil {
		return err
	}
	cpu, err := panel(fmt.Sprintf("process CPU per operation (%d member%s and the clients;", members, plural(members))+" not moved by the machine's other load)", "microseconds",
		"per Submit", points(func(s sizeResult) float64 { return usOf(s.Submit.CPU) }),
		"per cycle", points(func(s sizeResult) float64 { return usOf(s.Cycle.CPU) }))
	if err != nil {
		return err
	}

	img := vgimg.New(8*vg.Inch, 11*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	ps := []*plot.Plot{rates, p99, cpu}
	cs := plot.Align([][]*plot.Plot{{rates}, {p99}, {cpu}}, tiles, dc)
	for i, p := range ps {
		p.Draw(cs[i][0])
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// panel is one panel against the backlog: lines are name, plotter.XYs
// pairs; the legend sits top left, with the y range raised by a third
// above the data so that it covers no line.
func panel(title, yLabel string, lines ...any) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "backlog (million pending jobs)"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Max *= 1.35
	return p, nil
}
