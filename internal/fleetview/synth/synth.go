// Package synth makes a synthetic fleet summary from a real single-host one: every node a copy of the
// measured host, scaled per node (a little noise per GPU, one straggler slower by a set factor), one
// node whose load Jobs failed, and one that never became Ready (skipped). The report and terminal
// benchmarks and tests read it; the result is not judged (the caller runs judge.CompareNodes and
// judge.Judge over it, as a fleet run does), so its flags and statuses are the real rules'.
package synth

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/gpuvet/gpuvet/internal/results"
)

// decided makes the measured node's figures decide (issue 42): the source was recorded on a loaded
// 2-core machine (client-limited rungs, intervals up to ±30 %), which the interval rule rightly
// leaves inconclusive; the synthetic fleet stands for healthy nodes measured by a client that kept
// up, so its client marks are cleared and every interval narrowed to ±1 % around its middle.
func decided(h results.Host) results.Host {
	b, _ := json.Marshal(h) // a copy: the source is the caller's
	var c results.Host
	_ = json.Unmarshal(b, &c)
	narrow := func(ci *results.Interval) {
		if ci != nil {
			mid := (ci.Lo + ci.Hi) / 2
			ci.Lo, ci.Hi = mid*0.99, mid*1.01
		}
	}
	for mi := range c.Models {
		for ei := range c.Models[mi].Endpoints {
			l := c.Models[mi].Endpoints[ei].Load
			if l == nil {
				continue
			}
			l.Client.ClientLimited = false
			for ri := range l.Runs {
				r := &l.Runs[ri]
				r.ClientLimited = false
				if r.CI != nil {
					for _, ci := range []*results.Interval{r.CI.TTFTP95, r.CI.TTFTP99, r.CI.ITLP95, r.CI.OutputTokS, r.CI.TPOTP95, r.CI.TPOTP50} {
						narrow(ci)
					}
				}
			}
		}
	}
	return c
}

// Options shape the fleet. A node index < 0 leaves that kind of node out.
type Options struct {
	Nodes int // hosts in hosts[] plus the never-ready one
	GPUs  int // GPUs per node (the source's endpoints and health GPUs are repeated to reach it)
	// Straggler is the node whose every figure is Slowdown slower (0.15: 15 % less throughput,
	// latencies ÷ 0.85).
	Straggler int
	Slowdown  float64
	Failed    int // the node whose load Jobs failed: health measured, no load figure
	// NeverReady is the node that never became Ready: listed in fleet.skipped, not in hosts[].
	NeverReady int
	NoisePct   float64 // per-GPU spread of the figures, ± this % (uniform)
	Seed       uint64
}

// Defaults are 1,000 nodes × 8 GPUs, node 7 15 % slower, node 13 failed, node 21 never ready.
func Defaults() Options {
	return Options{Nodes: 1000, GPUs: 8, Straggler: 7, Slowdown: 0.15, Failed: 13, NeverReady: 21, NoisePct: 1, Seed: 1}
}

// NodeName is the name of node i: gpu-node-0007.
func NodeName(i int) string { return fmt.Sprintf("gpu-node-%04d", i) }

// FailedError is the failed node's endpoint error, as the Kubernetes backend words a load Job that failed.
const FailedError = "load job against engine pod gpuvet-engine-0: Job has reached the specified backoff limit (BackoffLimitExceeded)"

// NeverReadyReason is the never-ready node's skip reason.
const NeverReadyReason = "node never became Ready (Ready=False, KubeletNotReady: container runtime network not ready)"

// Fleet builds the fleet summary from src, whose first host is the measured node.
func Fleet(src *results.Summary, o Options) (*results.Summary, error) {
	if src == nil || len(src.Hosts) == 0 {
		return nil, fmt.Errorf("synth: the source summary has no host")
	}
	if o.Nodes < 1 || o.GPUs < 1 {
		return nil, fmt.Errorf("synth: nodes %d, gpus %d: want at least 1 each", o.Nodes, o.GPUs)
	}
	proto, err := json.Marshal(decided(widen(src.Hosts[0], o.GPUs)))
	if err != nil {
		return nil, err
	}
	s := *src
	s.Hosts = make([]results.Host, 0, o.Nodes)
	s.Backend, s.Environment = "kubernetes", "k8s"
	s.Fleet = &results.Fleet{ParallelHosts: 64}
	s.Flags, s.Caveats, s.Baseline, s.Status = nil, nil, nil, results.StatusOK
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	for i := range o.Nodes {
		if i == o.NeverReady {
			s.Fleet.Skipped = append(s.Fleet.Skipped, results.SkippedHost{Name: NodeName(i), Reason: NeverReadyReason})
			continue
		}
		var h results.Host
		if err := json.Unmarshal(proto, &h); err != nil {
			return nil, err
		}
		h.Name = NodeName(i)
		node := 1.0
		if i == o.Straggler {
			node = 1 - o.Slowdown
		}
		for gi := range h.Discovery.GPUs {
			h.Discovery.GPUs[gi].UUID = uuid(h.Discovery.GPUs[gi].UUID, i)
		}
		if h.Health != nil {
			for gi := range h.Health.GPUs {
				g := &h.Health.GPUs[gi]
				g.GPU.UUID = uuid(g.GPU.UUID, i)
				for bi := range g.Bench {
					g.Bench[bi].Value *= noise(rng, o.NoisePct/4)
				}
			}
		}
		for mi := range h.Models {
			for ei := range h.Models[mi].Endpoints {
				e := &h.Models[mi].Endpoints[ei]
				scaleEndpoint(e, node*noise(rng, o.NoisePct))
				if i == o.Failed {
					e.Load, e.Power, e.SpeedOfLight, e.Functional, e.Telemetry, e.Verdicts = nil, nil, nil, nil, nil, nil
					e.Error, e.Status = FailedError, results.StatusFailed
				}
			}
		}
		if i == o.Failed {
			h.Error = "models failed: " + FailedError
		}
		s.Hosts = append(s.Hosts, h)
	}
	return &s, nil
}

// widen repeats the host's endpoints and health GPUs until it has gpus of each (GPU i is a copy of
// source GPU i mod n), and drops what is beyond.
func widen(h results.Host, gpus int) results.Host {
	h.Discovery.GPUs = repeat(h.Discovery.GPUs, gpus, func(g *results.GPUInfo, i int) { g.Index = i; g.UUID = uuid(g.UUID, 100000+i) })
	if h.Health != nil {
		hh := *h.Health
		hh.GPUs = repeat(hh.GPUs, gpus, func(g *results.GPUHealth, i int) { g.GPU.Index = i; g.GPU.UUID = uuid(g.GPU.UUID, 100000+i) })
		h.Health = &hh
	}
	models := make([]results.Model, len(h.Models))
	for mi, m := range h.Models {
		m.Endpoints = repeat(m.Endpoints, gpus, func(e *results.Endpoint, i int) {
			e.GPUs = []int{i}
			if e.Telemetry != nil {
				t := *e.Telemetry
				t.GPUs = append([]results.GPUTelemetry(nil), t.GPUs...)
				for ti := range t.GPUs {
					t.GPUs[ti].GPU = i
				}
				e.Telemetry = &t
			}
		})
		models[mi] = m
	}
	h.Models = models
	return h
}

func repeat[T any](src []T, n int, fix func(*T, int)) []T {
	if len(src) == 0 {
		return src
	}
	out := make([]T, n)
	for i := range out {
		out[i] = src[i%len(src)]
		if i >= len(src) {
			fix(&out[i], i)
		}
	}
	return out
}

// uuid makes a GPU UUID unique to node i (the last 6 hex digits carry it).
func uuid(u string, i int) string {
	if len(u) < 6 {
		return fmt.Sprintf("GPU-node-%d", i)
	}
	return u[:len(u)-6] + fmt.Sprintf("%06x", i&0xffffff)
}

// noise is a factor within ± pct %.
func noise(rng *rand.Rand, pct float64) float64 {
	return 1 + (rng.Float64()*2-1)*pct/100
}

// scaleEndpoint makes an endpoint f times as fast: throughput × f, latencies ÷ f.
func scaleEndpoint(e *results.Endpoint, f float64) {
	if l := e.Load; l != nil {
		l.PeakOutputTokS *= f
		l.SustainedReqS *= f
		l.BurstReqS *= f
		if sat := l.Saturation; sat != nil {
			sat.Peak *= f
			for i := range sat.Rungs {
				sat.Rungs[i] *= f
			}
		}
		for i := range l.Runs {
			r := &l.Runs[i]
			r.OutputTokS *= f
			r.TotalTokS *= f
			if r.Kind != "constant" && r.Kind != "poisson" { // an open-loop rung's rate is its schedule's
				r.ReqS *= f
			}
			for _, d := range []*results.Dist{&r.TTFT, &r.ITL, &r.TPOT, &r.E2E} {
				scaleDist(d, 1/f)
			}
			if ci := r.CI; ci != nil {
				for _, iv := range []*results.Interval{ci.TTFTP95, ci.TTFTP99, ci.ITLP95, ci.TPOTP95, ci.TPOTP50} {
					scaleInterval(iv, 1/f)
				}
				scaleInterval(ci.OutputTokS, f)
			}
		}
	}
	if p := e.Power; p != nil {
		p.TokensPerJoule *= f
	}
	if sol := e.SpeedOfLight; sol != nil {
		sol.MeasuredOutputTokS *= f
		sol.Percent *= f
	}
}

func scaleDist(d *results.Dist, f float64) {
	d.Mean, d.Min, d.Max, d.P50, d.P90, d.P95, d.P99 = d.Mean*f, d.Min*f, d.Max*f, d.P50*f, d.P90*f, d.P95*f, d.P99*f
}

func scaleInterval(iv *results.Interval, f float64) {
	if iv != nil {
		iv.Lo, iv.Hi = iv.Lo*f, iv.Hi*f
	}
}
