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

// writePlot draws two panels against the backlog (millions of pending
// jobs): Submit and cycle rates, and the p99s of Submit, cycle and claim;
// written as a PNG to path.
func writePlot(path string, sizes []sizeResult) error {
	points := func(y func(sizeResult) float64) plotter.XYs {
		xy := make(plotter.XYs, len(sizes))
		for i, s := range sizes {
			xy[i].X, xy[i].Y = float64(s.N)/1e6, y(s)
		}
		return xy
	}
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

	rates := plot.New()
	rates.Title.Text = "jobraft at scale: rates (3 members, C=64, fsync on)"
	rates.X.Label.Text = "backlog (million pending jobs)"
	rates.Y.Label.Text = "operations per second"
	rates.Y.Min = 0
	if err := plotutil.AddLinePoints(rates,
		"Submit", points(func(s sizeResult) float64 { return s.Submit.Rate }),
		"cycle (submit, claim, ack)", points(func(s sizeResult) float64 { return s.Cycle.Rate })); err != nil {
		return err
	}
	rates.Legend.Top, rates.Legend.Left = true, true
	headroom(rates)

	p99 := plot.New()
	p99.Title.Text = "p99 latency"
	p99.X.Label.Text = "backlog (million pending jobs)"
	p99.Y.Label.Text = "milliseconds"
	p99.Y.Min = 0
	if err := plotutil.AddLinePoints(p99,
		"Submit p99", points(func(s sizeResult) float64 { return msOf(s.Submit.P99) }),
		"cycle p99", points(func(s sizeResult) float64 { return msOf(s.Cycle.P99) }),
		"claim p99", points(func(s sizeResult) float64 { return msOf(s.Cycle.ClaimP99) })); err != nil {
		return err
	}
	p99.Legend.Top, p99.Legend.Left = true, true
	headroom(p99)

	img := vgimg.New(8*vg.Inch, 8*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	cs := plot.Align([][]*plot.Plot{{rates}, {p99}}, tiles, dc)
	rates.Draw(cs[0][0])
	p99.Draw(cs[1][0])

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

// headroom raises p's y range by a third above its data, so the legend
// (top left) does not cover a line.
func headroom(p *plot.Plot) {
	p.Y.Max *= 1.35
}
