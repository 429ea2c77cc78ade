package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"

	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// DigestHosts is the most hosts a fleet's summary.json keeps in full. A larger fleet's summary holds
// each host's digest (digestHost: its status, flags, errors and headline figures per GPU; at 1,000
// nodes × 8 GPUs the full entries would be hundreds of MB), and each host's full entry is written
// as a one-host summary hosts/NAME.json beside it (Host.DetailFile names it), which `gpuvet report`
// and every other reader of a summary read as they are.
const DigestHosts = 4

// HostsDir is the folder of a fleet run's per-host results under --out.
const HostsDir = "hosts"

// WriteSummary writes a fleet run's summary.json into dir, and for a fleet of more than DigestHosts
// hosts each host's hosts/NAME.json with the summary holding their digests. It returns what
// summary.json holds; a host file that cannot be written keeps that host in full in the summary,
// said on warn.
func WriteSummary(dir string, s *results.Summary, warn io.Writer) (*results.Summary, error) {
	written := s
	if len(s.Hosts) > DigestHosts {
		if err := writeHostFiles(dir, s); err != nil && warn != nil {
			fmt.Fprintln(warn, "gpuvet: WARNING: per-host results (those hosts stay in full in summary.json):", err)
		}
		written = digest(s)
	}
	return written, results.WriteJSON(filepath.Join(dir, "summary.json"), written)
}

// writeHostFiles writes hosts/NAME.json for every host of s and sets each host's DetailFile; the
// errors of the hosts it could not write come back joined (their DetailFile stays empty).
func writeHostFiles(dir string, s *results.Summary) error {
	var errs []error
	for i := range s.Hosts {
		h := &s.Hosts[i]
		one, err := report.HostsOnly(s, []string{h.Name})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rel := filepath.Join(HostsDir, Safe(h.Name)+".json")
		if err := writeCompact(filepath.Join(dir, rel), one); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", h.Name, err))
			continue
		}
		h.DetailFile = filepath.ToSlash(rel)
	}
	return errors.Join(errs...)
}

// writeCompact writes v as compact JSON atomically: a thousand host files indented would take
// more than twice the disk (about 0.8 MB each for 8 GPUs) for files that tools, not eyes, read.
func writeCompact(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// digest is s with every host that has its DetailFile replaced by its digest. s itself is not
// changed (the reports are written from it, charts and all).
func digest(s *results.Summary) *results.Summary {
	out := *s
	out.Hosts = make([]results.Host, len(s.Hosts))
	for i, h := range s.Hosts {
		if h.DetailFile != "" {
			h = digestHost(h)
		}
		out.Hosts[i] = h
	}
	return &out
}

// digestHost is what a large fleet's summary keeps of a host: what it is (GPU inventory ids), how
// it did (statuses, flags, errors at every level, every verdict that did not pass) and the figures
// a fleet is read by (per endpoint: peak output tok/s, sustained req/s, the synchronous rung's TTFT,
// ITL, TPOT and E2E distributions, power, tok/J, % of speed of light; the sweep's lower-bound and
// client-limited marks), figures rounded to 4 decimals. Left for its DetailFile: the microbenchmarks,
// burn, interconnect, DCGM tests, GPU-to-GPU tables, the other rungs and their intervals, verdicts
// that passed or were disabled, passed API tests, the client's reasons per rung, telemetry, time
// series, how the speed of light's batch was found, notes on power, endpoint URLs, engine command
// lines and timing; discovery's GPU list where health lists the same GPUs.
func digestHost(h results.Host) results.Host {
	d := results.Host{Name: h.Name, Status: h.Status, Flags: h.Flags, Error: h.Error, DetailFile: h.DetailFile, VMs: h.VMs, Prep: h.Prep,
		Discovery: results.Discovery{Source: h.Discovery.Source, Note: h.Discovery.Note, Error: h.Discovery.Error}}
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
			dh.GPUs = append(dh.GPUs, results.GPUHealth{GPU: gpuID(g.GPU), Status: g.Status, Flags: g.Flags, Notes: g.Notes, Busy: g.Busy})
		}
		d.Health = dh
	}
	for _, m := range h.Models {
		dm := results.Model{Model: m.Model, Engine: results.EngineInfo{Kind: m.Engine.Kind, Version: m.Engine.Version, TP: m.Engine.TP},
			Status: m.Status, Flags: m.Flags, Notes: m.Notes, Error: m.Error}
		for _, e := range m.Endpoints {
			dm.Endpoints = append(dm.Endpoints, digestEndpoint(e))
		}
		d.Models = append(d.Models, dm)
	}
	return d
}

// round4 rounds a figure to 4 decimals (0.1 µs of a latency in ms): the digest's figures print in
// 7 or 8 digits instead of 17.
func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

func roundDist(d results.Dist) results.Dist {
	return results.Dist{Count: d.Count, Mean: round4(d.Mean), Min: round4(d.Min), Max: round4(d.Max), P50: round4(d.P50), P90: round4(d.P90), P95: round4(d.P95), P99: round4(d.P99)}
}

// gpuID is the part of a GPU's inventory that says which card it is.
func gpuID(g results.GPUInfo) results.GPUInfo {
	return results.GPUInfo{Index: g.Index, Name: g.Name, UUID: g.UUID, Serial: g.Serial, PCIBusID: g.PCIBusID, NUMANode: g.NUMANode, MemoryTotalMiB: g.MemoryTotalMiB}
}

func digestEndpoint(e results.Endpoint) results.Endpoint {
	d := results.Endpoint{GPUs: e.GPUs, GPUName: e.GPUName, ProvisionSeconds: round4(e.ProvisionSeconds),
		Status: e.Status, Flags: e.Flags, Error: e.Error, Busy: e.Busy, LogFile: e.LogFile, LogTail: e.LogTail}
	if sol := e.SpeedOfLight; sol != nil {
		d.SpeedOfLight = &results.SpeedOfLight{BoundOutputTokS: round4(sol.BoundOutputTokS), MeasuredOutputTokS: round4(sol.MeasuredOutputTokS),
			Percent: round4(sol.Percent), Limit: sol.Limit, Batch: round4(sol.Batch), TP: sol.TP, GPU: sol.GPU}
	}
	for _, v := range e.Verdicts {
		if v.Result == "fail" || v.Result == "inconclusive" {
			d.Verdicts = append(d.Verdicts, v)
		}
	}
	if l := e.Load; l != nil {
		dl := &results.Load{Model: l.Model, PeakOutputTokS: round4(l.PeakOutputTokS), SustainedReqS: round4(l.SustainedReqS), BurstReqS: round4(l.BurstReqS),
			Interrupted: l.Interrupted, Error: l.Error, Runs: []results.Run{},
			Client: results.ClientCheck{ClientLimited: l.Client.ClientLimited}}
		if sat := l.Saturation; sat != nil {
			dl.Saturation = &results.Saturation{Truncated: sat.Truncated, Unsaturated: sat.Unsaturated, Peak: round4(sat.Peak), Reason: sat.Reason}
		}
		for _, r := range l.Runs {
			if r.Kind == "synchronous" {
				dl.Runs = append(dl.Runs, results.Run{Kind: r.Kind, Concurrency: r.Concurrency, WindowSeconds: round4(r.WindowSeconds), EndedBy: r.EndedBy,
					Requests: r.Requests, TTFT: roundDist(r.TTFT), ITL: roundDist(r.ITL), TPOT: roundDist(r.TPOT), E2E: roundDist(r.E2E),
					OutputTokS: round4(r.OutputTokS), ReqS: round4(r.ReqS), ClientLimited: r.ClientLimited, Busy: r.Busy})
				break
			}
		}
		d.Load = dl
	}
	if p := e.Power; p != nil {
		d.Power = &results.Power{IntervalSeconds: p.IntervalSeconds, MeanW: round4(p.MeanW), MaxW: round4(p.MaxW), TokensPerJoule: round4(p.TokensPerJoule)}
	}
	if f := e.Functional; f != nil {
		df := &results.Functional{Status: f.Status, Error: f.Error, Tests: []results.FunctionalTest{}}
		for _, t := range f.Tests {
			if !t.Passed {
				df.Tests = append(df.Tests, t)
			}
		}
		d.Functional = df
	}
	return d
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Safe makes a host name usable in a file name, one name to one file: a name that had to be changed
// gets a hash of the original ("gpu:1" and "gpu_1" never share a file or a folder).
func Safe(name string) string {
	s := unsafeChars.ReplaceAllString(name, "_")
	if s == name && s != "" && s != "." && s != ".." {
		return s
	}
	h := sha256.Sum256([]byte(name))
	return s + "-" + hex.EncodeToString(h[:4])
}
