// Package importer reads load-test results written by other tools — vLLM's `bench serve` /
// `benchmark_serving.py --save-result` JSON and guidellm's benchmarks.json report — as gpuvet
// summaries, so they can be judged, or used as baselines, next to gpuvet's own runs.
//
// An imported summary has one host ("imported"), one model, and one endpoint on GPU 0 (the other
// tools do not record which GPU served): callers that know better set Endpoint.GPUs and GPUName.
package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Format is a result-file format.
type Format string

const (
	FormatGPUVet    Format = "gpuvet"     // summary.json / baseline.json
	FormatVLLMBench Format = "vllm-bench" // vLLM bench serve / benchmark_serving.py result
	FormatGuideLLM  Format = "guidellm"   // guidellm benchmarks.json report
)

// Detect says which format a JSON document is, from its top-level keys.
func Detect(b []byte) (Format, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return "", fmt.Errorf("not a JSON object (%w): want a gpuvet summary, a vLLM bench result or a guidellm report", err)
	}
	switch {
	case top["schema_version"] != nil:
		return FormatGPUVet, nil
	case top["benchmarks"] != nil:
		return FormatGuideLLM, nil
	case top["completed"] != nil && (top["request_throughput"] != nil || top["output_throughput"] != nil):
		return FormatVLLMBench, nil
	}
	return "", errors.New(`unknown result format: no "schema_version" (gpuvet), "benchmarks" (guidellm) or "completed" + "request_throughput" (vLLM bench) key`)
}

// Read reads a result file in any supported format as a summary, saying which format it was.
func Read(path string) (*results.Summary, Format, error) {
	b, err := filelimit.Read(path, filelimit.Result, "result file")
	if err != nil {
		return nil, "", err
	}
	s, f, err := Parse(b)
	if err != nil {
		return nil, f, fmt.Errorf("%s: %w", path, err)
	}
	return s, f, nil
}

// Parse reads result bytes in any supported format as a summary.
func Parse(b []byte) (*results.Summary, Format, error) {
	f, err := Detect(b)
	if err != nil {
		return nil, "", err
	}
	var s *results.Summary
	switch f {
	case FormatGPUVet:
		s, err = results.Parse(b)
	case FormatVLLMBench:
		s, err = VLLMBench(b)
	case FormatGuideLLM:
		s, err = GuideLLM(b)
	}
	if err != nil {
		return nil, f, err
	}
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, ep := range m.Endpoints {
				if ep.Load == nil {
					continue
				}
				if err := checkFinite(ep.Load); err != nil {
					return nil, f, fmt.Errorf("%s %s: %w", f, m.Model, err)
				}
			}
		}
	}
	return s, f, nil
}

// imported wraps one model's load in a summary of one host and one endpoint.
func imported(f Format, model string, started time.Time, l *results.Load, caveats []string) *results.Summary {
	ep := results.Endpoint{GPUs: []int{0}, Load: l, Status: results.StatusOK}
	prof := l.Config
	return &results.Summary{
		SchemaVersion: results.SchemaVersion,
		Tool:          results.Tool{Name: string(f)},
		RunID:         "imported-" + string(f),
		StartedAt:     started,
		Complete:      true,
		Backend:       "import",
		Environment:   string(f),
		Meta:          results.Meta{Models: []string{model}, LoadProfile: &prof},
		Hosts: []results.Host{{Name: "imported", Discovery: results.Discovery{Source: "import", Note: "imported from a " + string(f) + " result: no GPU inventory"},
			Models: []results.Model{{Model: model, Engine: results.EngineInfo{Kind: "unknown"}, Endpoints: []results.Endpoint{ep}, Status: results.StatusOK}},
			Status: results.StatusOK}},
		Status:  results.StatusOK,
		Caveats: caveats,
	}
}

// exactDist computes a Dist from samples, percentiles interpolated linearly between closest ranks
// (numpy's default, as vLLM and guidellm compute theirs).
func exactDist(v []float64) results.Dist {
	if len(v) == 0 {
		return results.Dist{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return results.Dist{Count: len(s), Mean: sum / float64(len(s)), Min: s[0], Max: s[len(s)-1],
		P50: percentile(s, 50), P90: percentile(s, 90), P95: percentile(s, 95), P99: percentile(s, 99)}
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	r := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(r))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (r-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// checkFinite refuses a load whose figures overflowed (a latency of 1e308 s becomes +Inf in ms):
// JSON cannot carry them and no judge can compare them.
func checkFinite(l *results.Load) error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	for i, r := range l.Runs {
		for name, d := range map[string]results.Dist{"ttft": r.TTFT, "itl": r.ITL, "tpot": r.TPOT, "e2e": r.E2E} {
			for _, v := range []float64{d.Mean, d.Min, d.Max, d.P50, d.P90, d.P95, d.P99} {
				if bad(v) {
					return fmt.Errorf("run %d %s: a value overflows (%v): the file is damaged", i, name, v)
				}
			}
		}
		for _, v := range []float64{r.OutputTokS, r.TotalTokS, r.ReqS, r.MeanOutputTokens, r.MeanPromptTokens, r.WindowSeconds} {
			if bad(v) {
				return fmt.Errorf("run %d: a rate or count overflows (%v): the file is damaged", i, v)
			}
		}
	}
	if bad(l.SustainedReqS) || bad(l.PeakOutputTokS) {
		return fmt.Errorf("throughput overflows: the file is damaged")
	}
	return nil
}

// decode reads one JSON value; fields gpuvet does not know are ignored (the tools add them freely).
func decode(b []byte, v any) error {
	return json.NewDecoder(bytes.NewReader(b)).Decode(v)
}
