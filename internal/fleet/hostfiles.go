package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// SeriesInlineHosts is the most hosts whose time series a fleet's summary.json keeps inline. A
// larger fleet's summary leaves them out of every host's entry (at 1,000 nodes × 8 GPUs they would
// make it hundreds of MB): each host's full entry, series included, is written as a one-host summary
// hosts/NAME.json beside it (Host.DetailFile names it), which `gpuvet report` and every other
// reader of a summary read as they are.
const SeriesInlineHosts = 4

// HostsDir is the folder of a fleet run's per-host results under --out.
const HostsDir = "hosts"

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
		if err := results.WriteJSON(filepath.Join(dir, rel), one); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", h.Name, err))
			continue
		}
		h.DetailFile = filepath.ToSlash(rel)
	}
	return errors.Join(errs...)
}

// withoutSeries is s with the time series left out of every host that has its DetailFile: the same
// figures, per-rung summaries, verdicts and flags, without the samples they were drawn from. s itself
// is not changed (the reports are written from it, charts and all).
func withoutSeries(s *results.Summary) *results.Summary {
	out := *s
	out.Hosts = make([]results.Host, len(s.Hosts))
	for i, h := range s.Hosts {
		if h.DetailFile != "" {
			h = hostWithoutSeries(h)
		}
		out.Hosts[i] = h
	}
	return &out
}

func hostWithoutSeries(h results.Host) results.Host {
	if h.Health != nil {
		hh := *h.Health
		hh.GPUs = append([]results.GPUHealth(nil), hh.GPUs...)
		for i := range hh.GPUs {
			if b := hh.GPUs[i].Burn; b != nil {
				nb := *b
				nb.Samples = nil
				hh.GPUs[i].Burn = &nb
			}
		}
		h.Health = &hh
	}
	h.Models = append([]results.Model(nil), h.Models...)
	for mi := range h.Models {
		m := &h.Models[mi]
		m.Endpoints = append([]results.Endpoint(nil), m.Endpoints...)
		for ei := range m.Endpoints {
			e := &m.Endpoints[ei]
			if p := e.Power; p != nil {
				np := *p
				np.Samples = nil
				e.Power = &np
			}
			if t := e.Telemetry; t != nil {
				nt := *t
				nt.GPUs = append([]results.GPUTelemetry(nil), t.GPUs...)
				for gi := range nt.GPUs {
					nt.GPUs[gi].Samples, nt.GPUs[gi].Stride = nil, 0
				}
				e.Telemetry = &nt
			}
			if l := e.Load; l != nil && l.Server != nil {
				nl, ns := *l, *l.Server
				ns.Samples = nil
				nl.Server = &ns
				e.Load = &nl
			}
		}
	}
	return h
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
