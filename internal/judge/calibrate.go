package judge

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CalibrateOptions are the seed's calibration margins (TTFT p95 +30 % over the worst, sustained
// throughput −25 % under the worst; ITL left at the global gate unless ITL is set).
type CalibrateOptions struct {
	TTFTMarginPct       float64 // 30
	ThroughputMarginPct float64 // 25
	ITL                 bool    // also write itl_p95_ms (worst + TTFTMarginPct)
}

// DefaultCalibrateOptions returns the seed's margins.
func DefaultCalibrateOptions() CalibrateOptions {
	return CalibrateOptions{TTFTMarginPct: results.DefaultOf(results.ThCalibTTFTMarginPct), ThroughputMarginPct: results.DefaultOf(results.ThCalibThrMarginPct)}
}

// CalibFigure is one measured figure that fed (or was kept out of) a calibration.
type CalibFigure struct {
	Run   string // the run's label (file name or run id)
	GPU   int
	Value float64
}

// CalibEntry is one reference-table cell: exact GPU name × exact model id.
type CalibEntry struct {
	GPU, Model      string
	TTFTP95Ms       *float64 // nil: no sync TTFT measured
	MinReqS         *float64 // nil: no usable sustained throughput
	ITLP95Ms        *float64 // nil unless asked
	TTFT, ReqS, ITL []CalibFigure
	Notes           []string // what was left out and why
}

// CalibRun is one healthy run to calibrate from, with the label its figures are quoted under.
// GPUs, when set, are the only GPU indexes it may give (the operator's choice for a run that is not
// ok); each must still be ok itself (calibUsable).
type CalibRun struct {
	Label   string
	Summary *results.Summary
	GPUs    []int
}

// Calibrate turns runs on known-healthy hardware into reference-table entries per exact GPU name ×
// model id, sorted; a lower bound "must not feed calibration" (the seed), nor a failed or client-limited endpoint.
func Calibrate(runs []CalibRun, opt CalibrateOptions) ([]CalibEntry, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("calibrate: no runs given; give 2–3 summary.json files from known-healthy hardware")
	}
	byKey := map[[2]string]*CalibEntry{}
	for _, run := range runs {
		for hi := range run.Summary.Hosts {
			h := &run.Summary.Hosts[hi]
			for _, m := range h.Models {
				for i := range m.Endpoints {
					ep := &m.Endpoints[i]
					if ok, why := endpointUsable(run, h, ep); !ok {
						leftOut(byKey, run.Label, m.Model, ep, i, why)
						continue
					}
					addEndpoint(byKey, run.Label, m.Model, ep, i)
				}
			}
		}
	}
	if len(byKey) == 0 {
		return nil, fmt.Errorf("calibrate: no endpoint with a GPU name and a load in %d run(s): nothing to calibrate from", len(runs))
	}
	var out []CalibEntry
	for _, e := range byKey {
		e.TTFTP95Ms = marginUp(e.TTFT, opt.TTFTMarginPct)
		e.MinReqS = marginDown(e.ReqS, opt.ThroughputMarginPct)
		if opt.ITL {
			e.ITLP95Ms = marginUp(e.ITL, opt.TTFTMarginPct)
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b CalibEntry) int {
		return cmp.Or(strings.Compare(a.GPU, b.GPU), strings.Compare(a.Model, b.Model))
	})
	return out, nil
}

// calibEntry is the entry of an endpoint's GPU × model (nil for an unnamed GPU).
func calibEntry(byKey map[[2]string]*CalibEntry, model string, ep *results.Endpoint) *CalibEntry {
	if ep.GPUName == "" {
		return nil
	}
	key := [2]string{ep.GPUName, model}
	if byKey[key] == nil {
		byKey[key] = &CalibEntry{GPU: ep.GPUName, Model: model}
	}
	return byKey[key]
}

// leftOut notes an endpoint that may not feed calibration under its GPU × model.
func leftOut(byKey map[[2]string]*CalibEntry, label, model string, ep *results.Endpoint, i int, why string) {
	if e := calibEntry(byKey, model, ep); e != nil {
		e.Notes = append(e.Notes, fmt.Sprintf("%s gpu %d left out: %s", label, endpointGPU(ep, i), why))
	}
}

func addEndpoint(byKey map[[2]string]*CalibEntry, label, model string, ep *results.Endpoint, i int) {
	if ep.GPUName == "" || ep.Load == nil {
		return
	}
	e, gpu, l := calibEntry(byKey, model, ep), endpointGPU(ep, i), ep.Load
	switch {
	case ep.Error != "" || ep.Status == results.StatusFailed || (l.Error != "" && len(l.Runs) == 0):
		leftOut(byKey, label, model, ep, i, "the endpoint failed")
		return
	case l.Client.ClientLimited:
		leftOut(byKey, label, model, ep, i, "the load generator was the bottleneck (client-limited)")
		return
	}
	if r := FindRun(l, RunSynchronous); r != nil && r.TTFT.Count > 0 {
		e.TTFT = append(e.TTFT, CalibFigure{label, gpu, r.TTFT.P95})
		if r.ITL.Count > 0 {
			e.ITL = append(e.ITL, CalibFigure{label, gpu, r.ITL.P95})
		}
	}
	switch {
	case l.SustainedReqS <= 0:
	case l.Saturation.LowerBound():
		e.Notes = append(e.Notes, fmt.Sprintf("%s gpu %d throughput %.2f req/s left out: its sweep is a lower bound (%s)", label, gpu, l.SustainedReqS, l.Saturation.Reason))
	default:
		e.ReqS = append(e.ReqS, CalibFigure{label, gpu, l.SustainedReqS})
	}
}

// marginUp is the worst (highest) figure + pct, rounded up to a whole ms.
func marginUp(figs []CalibFigure, pct float64) *float64 {
	if len(figs) == 0 {
		return nil
	}
	w := worst(figs, false).Value
	return f(math.Ceil(w * (1 + pct/100)))
}

// marginDown is the worst (lowest) figure − pct, rounded down to 0.1 req/s, or under 1 req/s to two
// significant figures (a slow model's 0.09 req/s floor must not round down to a gate of 0).
func marginDown(figs []CalibFigure, pct float64) *float64 {
	if len(figs) == 0 {
		return nil
	}
	v := worst(figs, true).Value * (1 - pct/100)
	scale := 10.0
	if v > 0 && v < 1 {
		scale = math.Pow(10, 1-math.Floor(math.Log10(v)))
	}
	return f(math.Floor(v*scale+1e-9) / scale)
}

// worst is the lowest figure when higher is better, else the highest.
func worst(figs []CalibFigure, higherIsBetter bool) CalibFigure {
	byValue := func(a, b CalibFigure) int { return cmp.Compare(a.Value, b.Value) }
	if higherIsBetter {
		return slices.MinFunc(figs, byValue)
	}
	return slices.MaxFunc(figs, byValue)
}

// WriteCalibrationYAML prints entries as YAML to paste under `reference:`, keyed by exact GPU name
// then model id, with the figures used as comments.
func WriteCalibrationYAML(w io.Writer, entries []CalibEntry, runs []string, opt CalibrateOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# gpuvet calibrate: %d run(s): %s\n", len(runs), strings.Join(runs, ", "))
	fmt.Fprintf(&b, "# margins: ttft_p95_ms = worst sync TTFT p95 + %g %%, min_throughput_req_s = worst sustained req/s − %g %%", opt.TTFTMarginPct, opt.ThroughputMarginPct)
	if opt.ITL {
		fmt.Fprintf(&b, ", itl_p95_ms = worst sync ITL p95 + %g %%", opt.TTFTMarginPct)
	} else {
		b.WriteString("; itl_p95_ms inherits the global gate (use --itl to set it)")
	}
	b.WriteString("\n")
	if len(runs) < 2 {
		b.WriteString("# WARNING: one run only; calibrate from 2–3 runs on known-healthy hardware\n")
	}
	b.WriteString("reference:\n")
	lastGPU := ""
	for _, e := range entries {
		if e.GPU != lastGPU {
			fmt.Fprintf(&b, "  %s:\n", yamlQuote(e.GPU))
			lastGPU = e.GPU
		}
		fmt.Fprintf(&b, "    %s:\n", yamlQuote(e.Model))
		for _, n := range e.Notes {
			fmt.Fprintf(&b, "      # %s\n", n)
		}
		writeKey(&b, results.ThresholdOf(results.ThTTFTP95Ms).Gate, e.TTFTP95Ms, "sync TTFT p95 (ms)", e.TTFT, false)
		writeKey(&b, results.ThresholdOf(results.ThMinThroughputReqS).Gate, e.MinReqS, "sustained req/s", e.ReqS, true)
		if opt.ITL {
			writeKey(&b, results.ThresholdOf(results.ThITLP95Ms).Gate, e.ITLP95Ms, "sync ITL p95 (ms)", e.ITL, false)
		}
		if e.TTFTP95Ms == nil && e.MinReqS == nil && (!opt.ITL || e.ITLP95Ms == nil) {
			b.WriteString("      {}\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeKey(b *strings.Builder, key string, v *float64, what string, figs []CalibFigure, higher bool) {
	if v == nil {
		fmt.Fprintf(b, "      # %s: no usable %s measured: inherits the global gate\n", key, what)
		return
	}
	wf := worst(figs, higher)
	vals := make([]string, len(figs))
	for i, x := range figs {
		vals[i] = fmtNum(x.Value)
	}
	fmt.Fprintf(b, "      # %s: worst %s (%s gpu %d) of %d: %s\n", what, fmtNum(wf.Value), wf.Run, wf.GPU, len(figs), strings.Join(vals, ", "))
	fmt.Fprintf(b, "      %s: %s\n", key, strconv.FormatFloat(*v, 'f', -1, 64)) // as computed: %.1f wrote 0.037 as 0
}

// yamlQuote single-quotes a key (GPU names and model ids carry spaces, slashes, colons).
func yamlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
