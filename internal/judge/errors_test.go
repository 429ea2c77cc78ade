package judge

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// withErrors adds failed requests of the given kinds to a sweep's constant rung.
func withErrors(ep *results.Endpoint, kinds map[string]int) {
	r := &ep.Load.Runs[2]
	r.Errors = map[string]int{}
	for k, n := range kinds {
		r.Errors[k] += n
		r.Requests.Errored += n
	}
}

// withXID gives the endpoint's GPU an XID during the load: evidence about the GPU, so its failed
// requests are the GPU's.
func withXID(ep *results.Endpoint) {
	ep.Telemetry = &results.Telemetry{Source: "nvml", GPUs: []results.GPUTelemetry{{GPU: ep.GPUs[0], XIDs: []results.XIDEvent{{XID: 79, Note: "GPU has fallen off the bus"}}}}}
}

// The audit's fault run: 411 of 896 requests failed, yet the run ended ok. With evidence about the
// GPU (here an XID during the load) any error flags; above the configured share the GPU fails
// (exit 1 without --fail-on-flag), with the errors by kind.
func TestApplyErrorRateGate(t *testing.T) {
	tests := []struct {
		name     string
		kinds    map[string]int
		limit    *float64
		status   results.Status
		result   string
		inReason []string
	}{
		{"no error passes", nil, fp(1), results.StatusOK, ResultPass, []string{"0 of 2400 requests failed"}},
		{"one error flags below the share", map[string]int{"http_500": 1}, fp(1), results.StatusFlag, ResultPass, []string{"1 of 2401", "http_500 1"}},
		{"many errors fail", map[string]int{"http_500": 250, "cut_stream": 161}, fp(1), results.StatusFailed, ResultFail,
			[]string{"411 of 2811 requests failed", "http_500 250, cut_stream 161", "above 1.00 % (default)"}},
		{"a disabled gate still flags", map[string]int{"timeout": 500}, nil, results.StatusFlag, ResultDisabled, []string{"500 of 2900", "timeout 500"}},
		{"zero tolerance fails on one", map[string]int{"connect": 1}, fp(0), results.StatusFailed, ResultFail, []string{"connect 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := summary(healthy(), healthy())
			withErrors(&s.Hosts[0].Models[0].Endpoints[1], tc.kinds)
			if tc.kinds != nil {
				withXID(&s.Hosts[0].Models[0].Endpoints[1])
			}
			cfg := DefaultConfig()
			cfg.MaxErrorRatePct.Value = tc.limit
			Apply(s, cfg)
			ep := s.Hosts[0].Models[0].Endpoints[1]
			v := verdict(t, ep, CheckErrorRate)
			if ep.Status != tc.status || v.Result != tc.result {
				t.Fatalf("status %s verdict %s (%s), want %s %s", ep.Status, v.Result, v.Reason, tc.status, tc.result)
			}
			text := v.Reason
			for _, fl := range ep.Flags {
				text += "\n" + fl.Reason
			}
			for _, want := range tc.inReason {
				if !strings.Contains(text, want) {
					t.Errorf("reasons %q lack %q", text, want)
				}
			}
			if tc.status != results.StatusOK && ExitCode(s, tc.status == results.StatusFlag, false) != 1 {
				t.Errorf("exit code %d, want 1", ExitCode(s, true, false))
			}
			Apply(s, cfg) // idempotent: the flag is the judge's own
			if got := len(s.Hosts[0].Models[0].Endpoints[1].Flags); got != len(ep.Flags) {
				t.Errorf("second Apply: %d flags, want %d", got, len(ep.Flags))
			}
		})
	}
}

func TestErrorRateDefaultRecorded(t *testing.T) {
	th := DefaultConfig().Thresholds()["gate.max_error_rate_pct"]
	if th.Value == nil || *th.Value != 1 || th.Source != SourceDefault {
		t.Fatalf("max_error_rate_pct threshold %+v, want 1 %% (default)", th)
	}
}

// findingLayer is the layer a request fault's findings belong to: a network fault is the
// infrastructure's. The layer table says it by check, this by fault, so the test holds the two
// together.
func findingLayer(faultLayer string) string {
	if faultLayer == results.LayerNetwork {
		return results.LayerInfra
	}
	return faultLayer
}

// Every failed request names its layer. Without evidence about the GPU, what the engine did wrong
// (short output despite ignore_eos, a stream cut without a finish reason, an HTTP 500 with a Python
// traceback, an exit) leaves the GPU inconclusive with "the engine misbehaved" and the first
// requests as evidence, never failed or flagged; a connection refused by a running engine is the
// network's, a timeout of a client-limited rung the client's; a GPU error in the engine's words
// makes them the GPU's again, and the error-rate gate fails it.
func TestFailedRequestsNameTheirLayer(t *testing.T) {
	sample := func(class, detail string) results.ErrorSample {
		return results.ErrorSample{Class: class, Detail: detail, Index: 17, EndS: 81.2, OutputTokens: 11, RequestedTokens: 256}
	}
	tb := "Traceback (most recent call last):\n  File \"serve.py\", line 3, in generate\nKeyError: 'gv-1'"
	tests := []struct {
		name     string
		kinds    map[string]int
		samples  []results.ErrorSample
		logTail  string
		exit     string
		clientLt bool
		status   results.Status
		check    string
		layer    string
		inReason []string
	}{
		{"short output despite ignore_eos", map[string]int{"short_output": 2}, []results.ErrorSample{sample("short_output", "asked for 256 output tokens, got 11")}, "", "", false,
			results.StatusFlag, CheckEngineFault, results.LayerEngine, []string{"the engine misbehaved: short output despite ignore_eos (2 request(s))", "rung 3 (constant", "request #17 at 81.2 s: short_output (asked for 256 output tokens, got 11)"}},
		{"cut streams", map[string]int{"cut_stream": 300}, nil, "", "", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"stream cut without a finish reason (300 request(s))"}},
		{"an HTTP 500 with a traceback", map[string]int{"http_500": 40}, []results.ErrorSample{sample("http_500", tb)}, tb, "", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"HTTP 500 server error (40 request(s))", "Python traceback ending in KeyError: 'gv-1'"}},
		{"an engine that exits", map[string]int{"connect": 90, "cut_stream": 8}, nil, "", "exit status 1", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"connection refused after the engine exited", "the engine process exited during the load: exit status 1"}},
		{"connections refused by a running engine across the network", map[string]int{"connect": 5}, nil, "", "", false,
			results.StatusFlag, CheckNetworkFault, results.LayerNetwork, []string{"the network or a proxy"}},
		{"connections refused by the engine on this host", map[string]int{"connect": 5}, nil, "", "", false,
			results.StatusFlag, CheckEngineFault, results.LayerEngine, []string{"connect (5 request(s))"}},
		{"timeouts of a client-limited rung", map[string]int{"timeout": 5}, nil, "", "", true,
			results.StatusInconclusive, CheckClientFault, results.LayerClient, []string{"the load generator fell behind"}},
		{"a GPU error in the engine's log", map[string]int{"http_500": 40}, []results.ErrorSample{sample("http_500", "RuntimeError: CUDA error: uncorrectable ECC error encountered")}, "", "", false,
			results.StatusFailed, CheckErrorRate, results.LayerGPU, []string{"40 of 2440 requests failed", "CUDA error: uncorrectable ECC error"}},
		{"an engine that dies with a GPU error in its log", map[string]int{"connect": 90, "cut_stream": 8}, nil,
			"Traceback (most recent call last):\n  File \"worker.py\", line 9, in step\nRuntimeError: CUDA error: uncorrectable ECC error encountered", "exit status 1", false,
			results.StatusFailed, CheckErrorRate, results.LayerGPU, []string{"98 of 2498 requests failed", "engine log: RuntimeError: CUDA error: uncorrectable ECC error"}},
		// An illegal memory access (XID 31 behind it, an appXID) is an engine's bad kernel as
		// readily as a bad GPU: the engine's, the GPU not proven, a rerun decides.
		{"a device fault in a failed request's words", map[string]int{"http_500": 40}, []results.ErrorSample{sample("http_500", "RuntimeError: CUDA error: an illegal memory access was encountered")}, "", "", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"HTTP 500 server error (40 request(s))", "the GPU is not proven; rerun with a fresh engine"}},
		{"an engine that dies with a device fault in its log", map[string]int{"connect": 90, "cut_stream": 8}, nil,
			"Traceback (most recent call last):\n  File \"worker.py\", line 9, in step\nRuntimeError: CUDA error: unspecified launch failure", "exit status 1", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"the process exited (exit status 1)", "unspecified launch failure", "if it comes back on this GPU and not its siblings, reset the GPU"}},
		{"an application's XID in the engine's log", map[string]int{"http_500": 40}, nil, "NVRM: Xid (PCI:0000:18:00): 31, pid=4242, name=python3, Ch 00000010, intr 10000000. MMU Fault", "", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"HTTP 500 server error (40 request(s))", "the GPU is not proven; rerun with a fresh engine"}},
		{"the GPU off the bus in the engine's log", map[string]int{"http_500": 40}, nil, "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "", false,
			results.StatusFailed, CheckErrorRate, results.LayerGPU, []string{"40 of 2440 requests failed", "Xid (PCI:0000:18:00): 79"}},
		{"out of memory is not the GPU's", map[string]int{"http_500": 40}, []results.ErrorSample{sample("http_500", "torch.OutOfMemoryError: CUDA error: out of memory")}, "", "", false,
			results.StatusFailed, CheckEngineFault, results.LayerEngine, []string{"HTTP 500 server error (40 request(s))"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := summary(healthy(), healthy())
			ep := &s.Hosts[0].Models[0].Endpoints[1]
			withErrors(ep, tc.kinds)
			ep.Load.Runs[2].ErrorSamples = tc.samples
			ep.Load.Runs[2].ClientLimited = tc.clientLt
			ep.LogTail, ep.EngineExit = tc.logTail, tc.exit
			if strings.HasSuffix(tc.name, "on this host") {
				ep.URL = "http://127.0.0.1:8000"
			}
			Apply(s, DefaultConfig())
			if ep.Status != tc.status {
				t.Fatalf("status %s, want %s; verdicts %+v flags %+v", ep.Status, tc.status, ep.Verdicts, ep.Flags)
			}
			if want := map[bool]string{true: results.ActionRerun, false: results.ActionFixEngine}[strings.Contains(tc.inReason[len(tc.inReason)-1], "fresh engine") || strings.Contains(tc.inReason[len(tc.inReason)-1], "reset the GPU")]; tc.check == CheckEngineFault {
				for _, f := range ep.Flags {
					if f.Check == CheckEngineFault && f.Action != want {
						t.Errorf("the engine's fault asks for %s, want %s: %s", f.Action, want, f.Reason)
					}
				}
			}
			v := verdict(t, *ep, tc.check)
			if len(ep.Faults) != 1 || ep.Faults[0].Layer != tc.layer {
				t.Fatalf("faults %+v, want one of layer %s", ep.Faults, tc.layer)
			}
			for _, want := range tc.inReason {
				if !strings.Contains(v.Reason, want) {
					t.Errorf("%s reason %q lacks %q", tc.check, v.Reason, want)
				}
			}
			if tc.layer != results.LayerGPU {
				// Its own layer's finding: failed above gates.max_error_rate_pct, flagged at or
				// under it, inconclusive for the client; the GPU is never more than not proven.
				want := map[results.Status]string{results.StatusFailed: ResultFail, results.StatusFlag: ResultInconclusive, results.StatusInconclusive: ResultInconclusive}[tc.status]
				if v.Result != want {
					t.Errorf("%s: %s, want %s", tc.check, v.Result, want)
				}
				for _, f := range ep.Flags {
					if results.GPULayer(f.Layer) || f.Layer != findingLayer(tc.layer) {
						t.Errorf("a fault of the %s flags another layer: %+v", tc.layer, f)
					}
				}
				if g := s.Hosts[0].GPUs[1]; g.Status != results.StatusInconclusive {
					t.Errorf("gpu 1: %s, want inconclusive (not proven); why %q", g.Status, g.Why)
				}
				if tc.status == results.StatusFailed && (s.Status != results.StatusFailed || ExitCode(s, false, false) != 1) {
					t.Errorf("a broken %s: run %s exit %d, want failed, 1", tc.layer, s.Status, ExitCode(s, false, false))
				}
				if s.Hosts[0].Models[0].Endpoints[0].Status != results.StatusOK {
					t.Errorf("the other GPU: %s", s.Hosts[0].Models[0].Endpoints[0].Status)
				}
				if tc.layer == results.LayerEngine {
					// A faulty engine's figures decide no gate and enter no comparison.
					if g := verdict(t, *ep, "gate.ttft_p95"); g.Result != ResultInconclusive || !strings.Contains(g.Reason, "the engine misbehaved") {
						t.Errorf("TTFT gate on a faulty engine: %s %s", g.Result, g.Reason)
					}
					for _, c := range s.Hosts[0].Models[0].Comparisons {
						for _, cell := range c.Values {
							if cell.GPU == ep.GPUs[0] {
								t.Errorf("the faulty engine's GPU is in the %s comparison", c.Metric)
							}
						}
					}
				}
			}
		})
	}
}

// An XID that NVIDIA answers first by restarting the application (13, 31, 43, 45) during the
// engine's load is the engine's finding: the GPU is not proven and the failed requests beside it are
// not the GPU's; an XID of the GPU's own (79) flags the GPU and makes them its own.
func TestAppXIDIsTheEnginesNotTheGPUs(t *testing.T) {
	for _, tc := range []struct {
		xid       uint64
		check     string
		layer     string
		gpuStatus results.Status
	}{
		{13, CheckAppXIDLoad, results.LayerEngine, results.StatusInconclusive},
		{31, CheckAppXIDLoad, results.LayerEngine, results.StatusInconclusive},
		{79, CheckXIDLoad, results.LayerGPU, results.StatusFailed},
	} {
		s := summary(healthy(), healthy())
		ep := &s.Hosts[0].Models[0].Endpoints[1]
		withErrors(ep, map[string]int{"http_500": 250})
		ep.Telemetry = &results.Telemetry{Source: "nvml", GPUs: []results.GPUTelemetry{{GPU: ep.GPUs[0], XIDs: []results.XIDEvent{{XID: tc.xid}}}}}
		Apply(s, DefaultConfig())
		ep = &s.Hosts[0].Models[0].Endpoints[1]
		var layer string
		for _, f := range ep.Flags {
			if f.Check == tc.check {
				layer = f.Layer
			}
		}
		if layer != tc.layer {
			t.Errorf("XID %d: %s layer %q, want %q (flags %+v)", tc.xid, tc.check, layer, tc.layer, ep.Flags)
		}
		var gpuLayerFault bool
		for _, f := range ep.Faults {
			gpuLayerFault = gpuLayerFault || f.Layer == results.LayerGPU
		}
		if gpuLayerFault != (tc.layer == results.LayerGPU) {
			t.Errorf("XID %d: failed requests the GPU's = %v, want %v (%+v)", tc.xid, gpuLayerFault, tc.layer == results.LayerGPU, ep.Faults)
		}
		for _, g := range s.Hosts[0].GPUs {
			if g.Index == ep.GPUs[0] && g.Status != tc.gpuStatus {
				t.Errorf("XID %d: GPU %d %s, want %s (%v)", tc.xid, g.Index, g.Status, tc.gpuStatus, g.Why)
			}
		}
	}
}

// FuzzEngineWords: whatever an engine writes (its log, a failed request's body), reading it for the
// GPU's own words and for device faults ends, and removing an application's XIDs never adds words:
// a text with no GPU word read as one, or the reverse of what withoutAppXIDs leaves, is a bug.
func FuzzEngineWords(f *testing.F) {
	for _, s := range []string{"NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', GPU has fallen off the bus.", "XID 31 xid: 13 Xid (PCI:0000:01:00): 99999999999999999999",
		"RuntimeError: CUDA error: an illegal memory access was encountered", "torch.OutOfMemoryError: CUDA error: out of memory", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w := withoutAppXIDs(s)
		if len(w) > len(s) {
			t.Fatalf("withoutAppXIDs grew %q to %q", s, w)
		}
		if gpuError(s) && !gpuErrorRe.MatchString(s) {
			t.Fatalf("%q read as the GPU's words with none of them", s)
		}
		_, _ = deviceFault(s), engineBreakLayer(s)
	})
}

func engineBreakLayer(s string) string { l, _, _ := engineBreak("", s); return l }
