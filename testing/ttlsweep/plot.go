package main

// The picture: three panels side by side, each against the TTL on a log
// axis.
//
//	kill → grant (s)        false revocations          master cost per s
//	                        per session-hour           per 1,000 sessions
//	 ∙ runs, ● median        ∙ runs, ● median           ● KeepAlives/s
//	 -- TTL, ·· 2/3 TTL      ○ none seen (at ½ floor)   ■ CPU ms per s
//	                         ■ client jeopardies
//	                         -- detection floor

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	colRuns   = color.RGBA{R: 160, G: 160, B: 160, A: 255}
	colMedian = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	colSecond = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	colRef    = color.RGBA{R: 90, G: 90, B: 90, A: 255}
)

// writePlot draws the sweep into a PNG at path.
func writePlot(path string, cfg config, rows []runRow, pts []point) error {
	xs := make([]float64, 0, len(pts))
	for _, p := range pts {
		xs = append(xs, p.GrantedTTL.Seconds())
	}
	kill, err := killPanel(rows, pts, xs)
	if err != nil {
		return err
	}
	falseRev, err := falsePanel(rows, pts, xs)
	if err != nil {
		return err
	}
	cost, err := costPanel(pts, xs)
	if err != nil {
		return err
	}
	const w, h = 16 * vg.Inch, 5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8,
		PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	// Each panel in its tile (plot.Align would line up the data areas, but
	// moves the panels' titles apart when their glyphs differ).
	for i, p := range []*plot.Plot{kill, falseRev, cost} {
		p.Draw(tiles.At(dc, i, 0))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newPanel is a log-log plot ticked at the swept TTLs. The y axis has no
// label (the title says what it shows): gonum centres a y label at the
// linear middle of the range, which on a log axis pushes it past the top
// and squeezes the plot.
func newPanel(title string, ttls []float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "session TTL granted, s (both axes log)"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	seen := map[float64]bool{} // TTLs the cell clamped alike
	for _, x := range ttls {
		if !seen[x] {
			seen[x] = true
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(ticks125)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	lo, hi := minMax(ttls)
	p.X.Min, p.X.Max = lo/1.3, hi*1.3
	return p
}

// ticks125 labels 1, 2 and 5 times every power of ten in [min, max] (and
// marks the other integers times it), for a log axis.
func ticks125(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		base := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

func minMax(vs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return 0.1, 10
	}
	return lo, hi
}

// addRuns draws the per-run values as small grey dots.
func addRuns(p *plot.Plot, xys plotter.XYs) error {
	if len(xys) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.GlyphStyle = draw.GlyphStyle{Color: colRuns, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
	p.Add(s)
	p.Legend.Add("each run", s)
	return nil
}

// addSeries draws a median line with points.
func addSeries(p *plot.Plot, name string, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer) error {
	if len(xys) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(1.5)
	s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: shape}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// addRef draws y = k·x over the panel's TTL range as a dashed line.
func addRef(p *plot.Plot, name string, k float64, dashes []vg.Length) error {
	l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: k * p.X.Min}, {X: p.X.Max, Y: k * p.X.Max}})
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = colRef, vg.Points(1), dashes
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// setY fixes a log axis's range to the values it shows, padded.
func setY(p *plot.Plot, vs []float64) {
	lo, hi := minMax(positive(vs))
	p.Y.Min, p.Y.Max = lo/2, hi*2
}

func positive(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if v > 0 && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

func killPanel(rows []runRow, pts []point, ttls []float64) (*plot.Plot, error) {
	p := newPanel("(a) kill → next grant, s (lock-delay 0)", ttls)
	p.Legend.Top = false // the lines rise to the right
	var runs, med plotter.XYs
	var ys []float64
	for _, r := range rows {
		if v := r.killToGrant(); !math.IsNaN(v) {
			runs = append(runs, plotter.XY{X: r.GrantedTTL.Seconds(), Y: v})
			ys = append(ys, v)
		}
	}
	for _, pt := range pts {
		if !math.IsNaN(pt.KillToGrant) {
			med = append(med, plotter.XY{X: pt.GrantedTTL.Seconds(), Y: pt.KillToGrant})
		}
	}
	if len(med) == 0 {
		p.Title.Text += " (not measured)"
	}
	ys = append(ys, p.X.Min*2/3, p.X.Max)
	setY(p, ys)
	if err := addRef(p, "= TTL", 1, []vg.Length{vg.Points(4), vg.Points(3)}); err != nil {
		return nil, err
	}
	if err := addRef(p, "= TTL − renewal interval (2/3 TTL)", 2.0/3, []vg.Length{vg.Points(1), vg.Points(2)}); err != nil {
		return nil, err
	}
	if err := addRuns(p, runs); err != nil {
		return nil, err
	}
	return p, addSeries(p, "median", med, colMedian, draw.CircleGlyph{})
}

func falsePanel(rows []runRow, pts []point, ttls []float64) (*plot.Plot, error) {
	p := newPanel("(b) false revocations (and jeopardies) per session-hour, pauses + jitter", ttls)
	// The floor is the rate one expiry in one run would be: the smallest
	// non-zero rate a run can show. A zero is drawn at half of it.
	var hours []float64
	for _, r := range rows {
		if h := r.sessionHours(); h > 0 {
			hours = append(hours, h)
		}
	}
	if len(hours) == 0 {
		p.Title.Text += " (not measured)"
		setY(p, []float64{0.1, 10})
		return p, nil
	}
	floor := 1 / median(hours)
	var runs, runsZero, med, medZero plotter.XYs
	ys := []float64{floor / 2}
	for _, r := range rows {
		if r.Load == nil {
			continue
		}
		xy := plotter.XY{X: r.GrantedTTL.Seconds(), Y: r.falseRate()}
		if xy.Y > 0 {
			runs = append(runs, xy)
			ys = append(ys, xy.Y)
		} else {
			xy.Y = floor / 2
			runsZero = append(runsZero, xy)
		}
	}
	for _, pt := range pts {
		xy := plotter.XY{X: pt.GrantedTTL.Seconds(), Y: pt.FalseRate}
		switch {
		case math.IsNaN(xy.Y):
		case xy.Y > 0:
			med = append(med, xy)
		default:
			xy.Y = floor / 2
			medZero = append(medZero, xy)
		}
	}
	var jeop plotter.XYs
	for _, pt := range pts {
		if pt.JeopardyRate > 0 {
			jeop = append(jeop, plotter.XY{X: pt.GrantedTTL.Seconds(), Y: pt.JeopardyRate})
			ys = append(ys, pt.JeopardyRate)
		}
	}
	setY(p, append(ys, floor))
	fl, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: floor}, {X: p.X.Max, Y: floor}})
	if err != nil {
		return nil, err
	}
	fl.Color, fl.Width, fl.Dashes = colRef, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(fl)
	p.Legend.Add(fmt.Sprintf("floor: 1 per run (%.3g session-h)", 1/floor), fl)
	if err := addRuns(p, append(runs, runsZero...)); err != nil {
		return nil, err
	}
	if err := addSeries(p, "median", med, colMedian, draw.CircleGlyph{}); err != nil {
		return nil, err
	}
	if err := addSeries(p, "client jeopardies (median)", jeop, colSecond, draw.SquareGlyph{}); err != nil {
		return nil, err
	}
	if len(medZero) > 0 {
		s, err := plotter.NewScatter(medZero)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: colMedian, Radius: vg.Points(4), Shape: draw.RingGlyph{}}
		p.Add(s)
		p.Legend.Add("median 0: none seen (drawn at ½ floor)", s)
	}
	return p, nil
}

func costPanel(pts []point, ttls []float64) (*plot.Plot, error) {
	p := newPanel("(c) master cost per second per 1,000 sessions", ttls)
	var ka, cpu plotter.XYs
	var ys []float64
	for _, pt := range pts {
		if pt.KAPer1000 > 0 {
			ka = append(ka, plotter.XY{X: pt.GrantedTTL.Seconds(), Y: pt.KAPer1000})
			ys = append(ys, pt.KAPer1000)
		}
		if pt.CPUPer1000 > 0 {
			// In milliseconds of CPU per second, to share the axis.
			cpu = append(cpu, plotter.XY{X: pt.GrantedTTL.Seconds(), Y: pt.CPUPer1000 * 1000})
			ys = append(ys, pt.CPUPer1000*1000)
		}
	}
	if len(ys) == 0 {
		p.Title.Text += " (not measured)"
	}
	setY(p, ys)
	if err := addSeries(p, "KeepAlive calls/s", ka, colMedian, draw.CircleGlyph{}); err != nil {
		return nil, err
	}
	return p, addSeries(p, "master CPU, ms per s", cpu, colSecond, draw.SquareGlyph{})
}
