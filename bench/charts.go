package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeCharts draws the PNGs next to results.md and returns their file names.
func writeCharts(dir string, r *Results) ([]string, error) {
	var files []string
	add := func(name string, p *plot.Plot, err error) error {
		if err != nil {
			return fmt.Errorf("chart %s: %w", name, err)
		}
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("save %s: %w", name, err)
		}
		files = append(files, name)
		return nil
	}
	if len(r.Idle) > 0 {
		p, err := idleChart(r, "Idle cost per poll: bytes on the wire", "bytes per poll/tick",
			func(t perTick) float64 { return t.Bytes })
		if err := add("idle_bytes.png", p, err); err != nil {
			return files, err
		}
		p, err = idleChart(r, "Idle cost per poll: server execution time", "ms per poll/tick",
			func(t perTick) float64 { return t.ServerMS })
		if err := add("idle_server.png", p, err); err != nil {
			return files, err
		}
	}
	if len(r.Change) > 0 {
		p, err := latencyChart(r)
		if err := add("latency.png", p, err); err != nil {
			return files, err
		}
	}
	if len(r.Fleet) > 0 {
		p, err := fleetChart(r)
		if err := add("fleet.png", p, err); err != nil {
			return files, err
		}
	}
	return files, nil
}

func logPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// positive keeps log axes drawable.
func positive(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1e-3
	}
	return v
}

func idleChart(r *Results, title, ylabel string, f func(perTick) float64) (*plot.Plot, error) {
	p := logPlot(title, "rows in sys_metadata", ylabel)
	rec := make(plotter.XYs, len(r.Idle))
	nv := make(plotter.XYs, len(r.Idle))
	for i, x := range r.Idle {
		rec[i] = plotter.XY{X: float64(x.Rows), Y: positive(f(x.Reconciler))}
		nv[i] = plotter.XY{X: float64(x.Rows), Y: positive(f(x.Naive))}
	}
	return p, plotutil.AddLinePoints(p, "reconciler idle poll", rec, "naive (key, revision) poll", nv)
}

func latencyChart(r *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Commit → applied, p99 (one changed row)"
	p.Y.Label.Text = "ms"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	names := make([]string, len(r.Change))
	series := []struct {
		name string
		get  func(changeResult) latency
	}{
		{fmt.Sprintf("pull, polling every %v", r.Config.ChangeInterval), func(c changeResult) latency { return c.Poll }},
		{"pull + LISTEN/NOTIFY hint", func(c changeResult) latency { return c.Hint }},
		{"push: Redis pub/sub + re-read", func(c changeResult) latency { return c.Push }},
	}
	w := vg.Points(14)
	for si, s := range series {
		vals := make(plotter.Values, len(r.Change))
		for i, c := range r.Change {
			names[i] = sizeName(c.Rows) + " rows"
			v := s.get(c).P99
			if math.IsNaN(v) {
				v = 0
			}
			vals[i] = v
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(si)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(si-1) * w
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max *= 1.45 // headroom for the legend above the bars
	return p, nil
}

func fleetChart(r *Results) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Fleet: reconcilers polling one PostgreSQL every %v", r.Config.FleetInterval)
	p.X.Label.Text = "reconcilers"
	p.Y.Label.Text = "database CPU, % of one core"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	xy := make(plotter.XYs, len(r.Fleet))
	for i, f := range r.Fleet {
		xy[i] = plotter.XY{X: float64(f.Reconcilers), Y: f.CPUPercent}
	}
	if err := plotutil.AddLinePoints(p, "measured (whole cluster)", xy); err != nil {
		return nil, err
	}
	limit := plotter.NewFunction(func(float64) float64 { return 5 })
	limit.Color = color.RGBA{R: 200, A: 255}
	limit.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(limit)
	p.Legend.Add("target: 5% at 50", limit)
	p.Y.Min = 0
	p.Y.Max = max(6, p.Y.Max)
	return p, nil
}
