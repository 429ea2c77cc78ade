package report

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The Prometheus export is a node-exporter textfile: a run's headline figures and statuses as gauges
// (statusScale). A skipped or absent thing has no sample, so "not judged" never reads as "ok". Units
// are Prometheus base units (seconds, watts) unless the name says otherwise.

type promSample struct {
	labels [][2]string
	value  float64
}

type promFamily struct {
	name, help string
	samples    []promSample
}

type promDoc struct {
	fams  []*promFamily
	index map[string]*promFamily
}

// family declares a gauge; declaration order is output order.
func (d *promDoc) family(name, help string) *promFamily {
	if f, ok := d.index[name]; ok {
		return f
	}
	f := &promFamily{name: name, help: help}
	d.fams = append(d.fams, f)
	d.index[name] = f
	return f
}

func (f *promFamily) add(v float64, labels ...string) {
	s := promSample{value: v}
	for i := 0; i+1 < len(labels); i += 2 {
		s.labels = append(s.labels, [2]string{labels[i], labels[i+1]})
	}
	f.samples = append(f.samples, s)
}

// statusScale says statusValues in a gauge's help.
const statusScale = "0 ok, 0.5 inconclusive, 1 flag, 2 failed"

// statusValues are the statuses with a sample. Inconclusive sits between ok and flag, as it ranks:
// `> 0` alerts on it, `>= 1` does not; a run that did not finish is as bad as a failed one.
var statusValues = map[results.Status]float64{results.StatusOK: 0, results.StatusInconclusive: 0.5, results.StatusFlag: 1,
	results.StatusFailed: 2, results.StatusInterrupted: 2, results.StatusIncomplete: 2}

// b01 is a yes/no gauge's value: 1 for yes.
func b01(yes bool) float64 {
	if yes {
		return 1
	}
	return 0
}

func (f *promFamily) status(st results.Status, labels ...string) {
	if v, ok := statusValues[st]; ok {
		f.add(v, labels...)
	}
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

func promValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func (d *promDoc) bytes() []byte {
	var b bytes.Buffer
	for _, f := range d.fams {
		if len(f.samples) == 0 {
			continue
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", f.name, helpEscaper.Replace(f.help), f.name)
		// A series is written once, the first sample of it kept: node-exporter refuses a whole file
		// where two samples share a name and labels (a model listed twice is served twice).
		seen := make(map[string]bool, len(f.samples))
		for _, s := range f.samples {
			var series strings.Builder
			series.WriteString(f.name)
			if len(s.labels) > 0 {
				series.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						series.WriteByte(',')
					}
					// The text format is UTF-8: a broken byte in a name must not break the file.
					fmt.Fprintf(&series, `%s="%s"`, l[0], labelEscaper.Replace(strings.ToValidUTF8(l[1], "\uFFFD")))
				}
				series.WriteByte('}')
			}
			if seen[series.String()] {
				continue
			}
			seen[series.String()] = true
			b.WriteString(series.String())
			b.WriteByte(' ')
			b.WriteString(promValue(s.value))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// Prometheus builds the textfile of s.
func Prometheus(s *results.Summary) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("prometheus: no summary")
	}
	d := &promDoc{index: map[string]*promFamily{}}
	d.family("gpuvet_run_info", "The gpuvet run these figures come from (value always 1).").
		add(1, "run_id", s.RunID, "backend", s.Backend, "environment", s.Environment, "version", s.Tool.Version)
	d.family("gpuvet_run_status", "Run status: "+statusScale+".").status(s.Status)
	d.family("gpuvet_run_complete", "1 when the run finished and summary.json is final.").add(b01(s.Complete))
	if !s.StartedAt.IsZero() {
		d.family("gpuvet_run_start_time_seconds", "Unix time the run started.").add(float64(s.StartedAt.Unix()))
		if !s.FinishedAt.IsZero() {
			d.family("gpuvet_run_duration_seconds", "Wall time of the run.").add(s.FinishedAt.Sub(s.StartedAt).Seconds())
		}
	}
	byScope := map[string]int{}
	for _, f := range allFlags(s) {
		byScope[f.Scope]++
	}
	flags := d.family("gpuvet_flags", "Flags raised in the run, by scope.")
	for _, sc := range sortedKeys(byScope) {
		flags.add(float64(byScope[sc]), "scope", sc)
	}
	promNodes(d, s)
	promFindings(d, s)
	for _, h := range s.Hosts {
		d.family("gpuvet_host_status", "Host status: "+statusScale+".").status(h.Status, "host", h.Name)
		// A GPU's status is its judged verdict (health and serving), the one every surface shows; a
		// summary judged before verdicts per GPU existed has only the health one.
		gs := d.family("gpuvet_gpu_status", "GPU status, the worst of its health and serving verdicts: "+statusScale+".")
		for _, g := range h.GPUs {
			gs.status(g.Status, "host", h.Name, "gpu", strconv.Itoa(g.Index))
		}
		if h.Health != nil {
			promHealth(d, h.Name, h.Health, len(h.GPUs) == 0)
		}
		for _, m := range h.Models {
			promModel(d, h.Name, m)
		}
	}
	if b := s.Baseline; b != nil {
		ov := d.family("gpuvet_baseline_overhead_percent", "Overhead vs the bare-metal baseline in percent; positive is worse.")
		st := d.family("gpuvet_baseline_status", "Baseline comparison: 0 within tolerance, 1 not judged (low confidence or lower bound), 2 breach.")
		for _, r := range b.Rows {
			for _, env := range b.Environments {
				p, ok := r.OverheadPct[env]
				if !ok || r.Status[env] == "missing" {
					continue
				}
				l := []string{"subject", r.Subject, "metric", r.Metric, "environment", env}
				ov.add(p, l...)
				if v, ok := map[string]float64{"ok": 0, "low_confidence": 1, "lower_bound": 1, "breach": 2}[r.Status[env]]; ok {
					st.add(v, l...)
				}
			}
		}
	}
	return d.bytes(), nil
}

func promHealth(d *promDoc, host string, h *results.Health, unjudged bool) {
	d.family("gpuvet_health_status", "Health phase status of a host: "+statusScale+".").status(h.Status, "host", host)
	if h.DCGM != nil {
		d.family("gpuvet_dcgm_status", "DCGM diagnostic status: "+statusScale+" (absent when skipped).").status(h.DCGM.Status, "host", host)
	}
	for _, g := range h.GPUs {
		gi := strconv.Itoa(g.GPU.Index)
		d.family("gpuvet_gpu_info", "GPU inventory (value always 1).").add(1, "host", host, "gpu", gi, "name", g.GPU.Name, "uuid", g.GPU.UUID, "pci_bus_id", g.GPU.PCIBusID)
		d.family("gpuvet_gpu_health_status", "GPU health verdict: "+statusScale+".").status(g.Status, "host", host, "gpu", gi)
		if unjudged {
			d.family("gpuvet_gpu_status", "").status(g.Status, "host", host, "gpu", gi)
		}
		for _, b := range g.Bench {
			if b.Error != "" || b.Status == results.StatusFailed {
				continue
			}
			// One metric per unit, so a dashboard never adds TFLOP/s to GB/s.
			switch b.Unit {
			case "TFLOP/s":
				d.family("gpuvet_gpu_bench_tflops", "Compute microbenchmark (GEMM), TFLOP/s.").add(b.Value, "host", host, "gpu", gi, "bench", b.Name)
			case "GB/s":
				d.family("gpuvet_gpu_bench_gigabytes_per_second", "Bandwidth microbenchmark (PCIe, HBM), GB/s (10^9 bytes).").add(b.Value, "host", host, "gpu", gi, "bench", b.Name)
			default:
				d.family("gpuvet_gpu_bench", "Other microbenchmark figure, in the unit of the unit label.").add(b.Value, "host", host, "gpu", gi, "bench", b.Name, "unit", b.Unit)
			}
			if b.Ratio != nil {
				d.family("gpuvet_gpu_bench_peak_ratio", "Microbenchmark figure as a fraction of the datasheet peak.").add(*b.Ratio, "host", host, "gpu", gi, "bench", b.Name)
			}
			if b.Floor != nil {
				d.family("gpuvet_gpu_bench_floor_ratio", "The datasheet floor of a microbenchmark: the least fraction of its peak a healthy card reaches.").add(*b.Floor, "host", host, "gpu", gi, "bench", b.Name)
			}
		}
		d.family("gpuvet_gpu_busy", "1 when another process or unexplained load was on the GPU at the health phase.").add(b01(g.Busy != nil), "host", host, "gpu", gi)
		if e := g.GPU.ECC.VolatileUncorrected; e != nil {
			d.family("gpuvet_gpu_ecc_uncorrected_errors", "Uncorrected ECC errors.").add(float64(*e), "host", host, "gpu", gi, "counter", "volatile")
		}
		if e := g.GPU.ECC.AggregateUncorrected; e != nil {
			d.family("gpuvet_gpu_ecc_uncorrected_errors", "").add(float64(*e), "host", host, "gpu", gi, "counter", "aggregate")
		}
		if w := g.GPU.PCIe.WidthCurrent; w > 0 {
			d.family("gpuvet_gpu_pcie_link_width", "PCIe link width in lanes, current and max.").add(float64(w), "host", host, "gpu", gi, "link", "current")
			d.family("gpuvet_gpu_pcie_link_width", "").add(float64(g.GPU.PCIe.WidthMax), "host", host, "gpu", gi, "link", "max")
		}
		if b := g.Burn; b != nil && b.Error == "" {
			d.family("gpuvet_gpu_burn_power_watts", "Power during the burn, mean and max.").add(b.PowerMeanW, "host", host, "gpu", gi, "stat", "mean")
			d.family("gpuvet_gpu_burn_power_watts", "").add(b.PowerMaxW, "host", host, "gpu", gi, "stat", "max")
			d.family("gpuvet_gpu_burn_min_sm_clock_mhz", "Lowest SM clock seen during the burn, MHz.").add(float64(b.MinSMClockMHz), "host", host, "gpu", gi)
			d.family("gpuvet_gpu_burn_max_temperature_celsius", "Highest GPU temperature seen during the burn.").add(float64(b.MaxTempC), "host", host, "gpu", gi)
		}
	}
}

func promModel(d *promDoc, host string, m results.Model) {
	d.family("gpuvet_model_status", "Model status on a host: "+statusScale+".").status(m.Status, "host", host, "model", m.Model)
	for _, e := range m.Endpoints {
		l := []string{"host", host, "model", m.Model, "gpu", gpuLabel(e.GPUs)}
		d.family("gpuvet_endpoint_status", "Endpoint (model on a GPU) status: "+statusScale+".").status(e.Status, l...)
		if ld := e.Load; ld != nil && ld.Error == "" {
			d.family("gpuvet_output_tokens_per_second_peak", "Peak output tokens per second of the sweep.").add(ld.PeakOutputTokS, l...)
			d.family("gpuvet_sustained_requests_per_second", "Sustained req/s: peak output tok/s over mean output tokens per request.").add(ld.SustainedReqS, l...)
			d.family("gpuvet_throughput_lower_bound", "1 when throughput is only a lower bound (truncated or unsaturated sweep).").add(b01(ld.Saturation.LowerBound()), l...)
			if r := syncRun(ld); r != nil {
				if r.TTFT.Count > 0 {
					d.family("gpuvet_sync_ttft_p95_seconds", "Time to first token, p95, synchronous run.").add(r.TTFT.P95/1000, l...)
				}
				if r.ITL.Count > 0 {
					d.family("gpuvet_sync_itl_p95_seconds", "Inter-token latency, p95, synchronous run.").add(r.ITL.P95/1000, l...)
				}
				if r.TPOT.Count > 0 {
					d.family("gpuvet_sync_tpot_p95_seconds", "Time per output token, p95, synchronous run.").add(r.TPOT.P95/1000, l...)
				}
			}
		}
		if p := e.Power; p != nil {
			d.family("gpuvet_load_power_mean_watts", "Mean GPU power during the load.").add(p.MeanW, l...)
			if p.TokensPerJoule > 0 {
				d.family("gpuvet_tokens_per_joule", "Output tokens per joule at the peak rung.").add(p.TokensPerJoule, l...)
			}
		}
		for _, v := range e.Verdicts {
			gl := append(append([]string(nil), l...), "check", v.Check, "source", v.Source)
			g := d.family("gpuvet_gate_status", "Gate result: 0 pass, 1 inconclusive, 2 fail (disabled gates have no sample).")
			if x, ok := map[string]float64{"pass": 0, "inconclusive": 1, "fail": 2}[v.Result]; ok {
				g.add(x, gl...)
			}
		}
		if f := e.Functional; f != nil {
			failed := 0
			for _, t := range f.Tests {
				if !t.Passed {
					failed++
				}
			}
			d.family("gpuvet_functional_tests", "Functional API tests run against the endpoint.").add(float64(len(f.Tests)), l...)
			d.family("gpuvet_functional_tests_failed", "Functional API tests that failed.").add(float64(failed), l...)
		}
	}
}

// WritePrometheus writes the textfile of s to path atomically (node-exporter never reads half a file).
func WritePrometheus(s *results.Summary, path string) error { return writeFile(Prometheus, s, path) }
