package fleet

import (
	"encoding/json"
	"slices"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A large fleet's summary.json holds each host's digest: what the fleet's readers read (heat map,
// ranked nodes, the terminal's fleet block, the verdict, JUnit, CTRF, Prometheus), the rest left to
// the host's DetailFile. Its baseline.json also keeps what a comparison against it weighs.

// digestKind says what a digest is for.
type digestKind int

const (
	digestSummary  digestKind = iota // summary.json: read
	digestBaseline                   // baseline.json: compared against, metric by metric
)

// digest is s with every host that has its DetailFile replaced by its digest of kind k, and the
// node-to-node comparisons' figures rounded. s itself is not changed (the reports are written from
// it, charts and all).
func digest(s *results.Summary, k digestKind) *results.Summary {
	out := *s
	out.Hosts = make([]results.Host, len(s.Hosts))
	for i, h := range s.Hosts {
		if h.DetailFile != "" {
			h = digestHost(h, k)
		}
		out.Hosts[i] = h
	}
	if f := s.Fleet; f != nil {
		nf := *f
		nf.Comparisons = make([]results.Compare, len(f.Comparisons))
		for i, c := range f.Comparisons {
			nf.Comparisons[i] = roundCompare(c)
		}
		out.Fleet = &nf
	}
	return &out
}

// writeDigest writes a digested summary compact (indented is 2.3 times larger) and with every
// zero-valued field left out: at 1,000 nodes × 8 GPUs the keys of zeros were a fifth of the file,
// and a missing field decodes to the same zero (a set pointer is always written). encoding/json/v2
// with v1's semantics gives the one option v1 lacks: omitzero on every field.
func writeDigest(path string, s *results.Summary) error {
	b, err := jsonv2.Marshal(s, jsonv1.DefaultOptionsV1(), jsonv2.OmitZeroStructFields(true))
	if err != nil {
		return err
	}
	return writeCompact(path, json.RawMessage(b))
}

// digestHost is what a large fleet's summary keeps of a host: what it is (the GPUs' ids), how it
// did (statuses, flags, errors at every level, verdicts that did not pass, failed API tests) and
// per endpoint the figures a fleet is read by (digestLoad; mean power, tok/J), rounded to 6
// significant digits. A baseline's digest adds the microbenchmarks' figures and what a comparison
// weighs (digestLoad). The rest (burn, interconnect, DCGM tests, other rungs and percentiles,
// telemetry, timing, …) is left to the DetailFile.
func digestHost(h results.Host, k digestKind) results.Host {
	d := results.Host{Name: h.Name, Status: h.Status, Flags: h.Flags, Error: h.Error, DetailFile: h.DetailFile, VMs: h.VMs, Prep: h.Prep, GPUs: h.GPUs,
		Discovery: results.Discovery{Source: h.Discovery.Source, Note: h.Discovery.Note, Error: h.Discovery.Error}}
	if p := h.Parallel; p != nil { // how many at once; why is in the host's file
		d.Parallel = &results.ParallelChoice{Mode: p.Mode, GPUs: p.GPUs, Slots: p.Slots}
	}
	if h.Health == nil || len(h.Health.GPUs) == 0 { // else health.gpus says which cards they are
		for _, g := range h.Discovery.GPUs {
			d.Discovery.GPUs = append(d.Discovery.GPUs, gpuID(g))
		}
	}
	if hh := h.Health; hh != nil {
		dh := &results.Health{Source: hh.Source, Status: hh.Status, Flags: hh.Flags, Error: hh.Error, Notes: hh.Notes}
		if hh.DCGM != nil {
			dh.DCGM = &results.DCGM{Status: hh.DCGM.Status, Level: hh.DCGM.Level, Version: hh.DCGM.Version, Note: hh.DCGM.Note, Error: hh.DCGM.Error}
		}
		for _, g := range hh.GPUs {
			dg := results.GPUHealth{GPU: gpuID(g.GPU), Status: g.Status, Flags: g.Flags, Notes: g.Notes, Busy: g.Busy}
			if k == digestBaseline {
				for _, b := range g.Bench {
					dg.Bench = append(dg.Bench, results.Microbench{Name: b.Name, Value: round(b.Value), Unit: b.Unit, Status: b.Status, Error: b.Error, Busy: b.Busy})
				}
			}
			dh.GPUs = append(dh.GPUs, dg)
		}
		d.Health = dh
	}
	for _, m := range h.Models {
		dm := results.Model{Model: m.Model, Engine: results.EngineInfo{Kind: m.Engine.Kind, Version: m.Engine.Version, TP: m.Engine.TP},
			Status: m.Status, Flags: m.Flags, Notes: m.Notes, Error: m.Error}
		for _, e := range m.Endpoints {
			dm.Endpoints = append(dm.Endpoints, digestEndpoint(e, k))
		}
		d.Models = append(d.Models, dm)
	}
	return d
}

// gpuID is the part of a GPU's inventory that says which card it is.
func gpuID(g results.GPUInfo) results.GPUInfo {
	return results.GPUInfo{Index: g.Index, Name: g.Name, UUID: g.UUID, Serial: g.Serial, PCIBusID: g.PCIBusID, NUMANode: g.NUMANode, MemoryTotalMiB: g.MemoryTotalMiB}
}

func digestEndpoint(e results.Endpoint, k digestKind) results.Endpoint {
	d := results.Endpoint{GPUs: e.GPUs, GPUName: e.GPUName, Status: e.Status, Flags: e.Flags, Error: e.Error, Busy: e.Busy, LogFile: e.LogFile, LogTail: e.LogTail}
	for _, v := range e.Verdicts {
		if v.Result == "fail" || v.Result == "inconclusive" {
			d.Verdicts = append(d.Verdicts, v)
		}
	}
	if l := e.Load; l != nil {
		d.Load = digestLoad(l, k)
	}
	if p := e.Power; p != nil {
		d.Power = &results.Power{MeanW: round(p.MeanW), TokensPerJoule: round(p.TokensPerJoule)}
	}
	if f := e.Functional; f != nil {
		df := &results.Functional{Status: f.Status, Error: f.Error}
		for _, t := range f.Tests {
			if !t.Passed {
				df.Tests = append(df.Tests, t)
			}
		}
		d.Functional = df
	}
	return d
}

// digestLoad keeps of a load its headline figures, whether the client or the sweep limits them,
// and the synchronous rung's requests, TTFT and ITL p95 and TPOT p95 and median with their counts
// (what judge.LLMMetrics compares). A baseline's digest adds what those comparisons weigh: the
// synchronous rung's intervals, the peak rung (its requests and output tok/s interval) and the
// concurrency rung (aicr's figures).
func digestLoad(l *results.Load, k digestKind) *results.Load {
	dl := &results.Load{PeakOutputTokS: round(l.PeakOutputTokS), SustainedReqS: round(l.SustainedReqS),
		Interrupted: l.Interrupted, Error: l.Error, Client: results.ClientCheck{ClientLimited: l.Client.ClientLimited}}
	if sat := l.Saturation; sat != nil && (sat.LowerBound() || sat.Reason != "") {
		dl.Saturation = &results.Saturation{Truncated: sat.Truncated, Unsaturated: sat.Unsaturated, Reason: sat.Reason}
	}
	peak := judge.PeakRun(l)
	for i, r := range l.Runs {
		sync, isPeak := r.Kind == "synchronous", &l.Runs[i] == peak
		if !sync && (k != digestBaseline || (!isPeak && r.Kind != "concurrency")) {
			continue
		}
		// The requests behind its figures (judge's samples), not the warm-up or the cut ones.
		dr := results.Run{Kind: r.Kind, Concurrency: r.Concurrency, ClientLimited: r.ClientLimited, Busy: r.Busy,
			Requests: results.RequestCounts{Successful: r.Requests.Successful, Errored: r.Requests.Errored, Streamed: r.Requests.Streamed}}
		if k == digestBaseline {
			dr.OutputTokS = round(r.OutputTokS)
		}
		if sync {
			dr.TTFT = results.Dist{Count: r.TTFT.Count, P95: round(r.TTFT.P95)}
			dr.ITL = results.Dist{Count: r.ITL.Count, P95: round(r.ITL.P95)}
			dr.TPOT = results.Dist{Count: r.TPOT.Count, P50: round(r.TPOT.P50), P95: round(r.TPOT.P95)}
		}
		if r.Kind == "concurrency" {
			dr.TTFT = results.Dist{Count: r.TTFT.Count, P99: round(r.TTFT.P99)}
		}
		if k == digestBaseline && r.CI != nil {
			ci := results.Intervals{}
			if sync {
				ci.TTFTP95, ci.ITLP95, ci.TPOTP95, ci.TPOTP50 = roundInterval(r.CI.TTFTP95), roundInterval(r.CI.ITLP95), roundInterval(r.CI.TPOTP95), roundInterval(r.CI.TPOTP50)
			}
			if isPeak || r.Kind == "concurrency" {
				ci.OutputTokS = roundInterval(r.CI.OutputTokS)
			}
			if r.Kind == "concurrency" {
				ci.TTFTP99 = roundInterval(r.CI.TTFTP99)
			}
			if ci != (results.Intervals{}) {
				dr.CI = &ci
			}
		}
		dl.Runs = append(dl.Runs, dr)
	}
	return dl
}

// roundCompare is a node-to-node comparison with its figures rounded (one cell per node and metric:
// 12,000 cells at 1,000 nodes); its flags, reasons and notes as they are.
func roundCompare(c results.Compare) results.Compare {
	c.Best, c.DetectablePct = round(c.Best), round(c.DetectablePct)
	c.Values = slices.Clone(c.Values)
	for i := range c.Values {
		v := &c.Values[i]
		v.Value, v.DeltaPct, v.Reference, v.DeltaCI = round(v.Value), round(v.DeltaPct), round(v.Reference), roundInterval(v.DeltaCI)
	}
	return c
}

// round rounds a figure to 6 significant digits (far below any measurement's noise): 6 or 7
// characters instead of 17 (1.1 MB of 8.3 at 1,000 nodes). A report rebuilt from it may print a
// last digit one off (3,924 for 3,923.4996 tok/s) in about 1 % of its figures.
func round(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil { // ±Inf and NaN are never in a summary (JSON cannot hold them)
		return v
	}
	return r
}

func roundInterval(i *results.Interval) *results.Interval {
	if i == nil {
		return nil
	}
	return &results.Interval{Lo: round(i.Lo), Hi: round(i.Hi), Level: i.Level}
}
