package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuvet/gpuvet/internal/results"
)

func parseProm(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not valid Prometheus text format: %v\n%s", err, b)
	}
	return fams
}

func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	if f.GetType() != dto.MetricType_GAUGE {
		t.Errorf("%s is %v, want gauge", name, f.GetType())
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s%v: no such sample", name, labels)
	return 0
}

func TestPrometheusSample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpuvet.prom")
	s0 := readSample(t)
	if err := WritePrometheus(s0, path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	fams := parseProm(t, b)
	ep := func(gpu string) map[string]string {
		return map[string]string{"host": "gpu-node-01", "model": "Qwen/Qwen3-8B", "gpu": gpu}
	}
	cases := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpuvet_run_status", nil, 1},
		{"gpuvet_gpu_bench_tflops", map[string]string{"gpu": "3", "bench": "sgemm_fp32"}, s0.Hosts[0].Health.GPUs[3].Bench[0].Value},
		{"gpuvet_gpu_bench_gigabytes_per_second", map[string]string{"gpu": "0", "bench": "hbm_d2d"}, s0.Hosts[0].Health.GPUs[0].Bench[5].Value},
		{"gpuvet_run_complete", nil, 1},
		{"gpuvet_gpu_status", map[string]string{"gpu": "3"}, 1},
		{"gpuvet_gpu_status", map[string]string{"gpu": "0"}, 0},
		{"gpuvet_endpoint_status", ep("3"), 1},
		{"gpuvet_throughput_lower_bound", ep("2"), 1},
		{"gpuvet_throughput_lower_bound", ep("0"), 0},
		{"gpuvet_gate_status", map[string]string{"gpu": "3", "check": "gate.sustained_req_s", "source": "reference"}, 2},
		{"gpuvet_gate_status", map[string]string{"gpu": "2", "check": "gate.sustained_req_s"}, 1},
		{"gpuvet_gate_status", map[string]string{"gpu": "0", "check": "gate.ttft_p95"}, 0},
		{"gpuvet_functional_tests_failed", ep("1"), 1},
		{"gpuvet_baseline_status", map[string]string{"subject": "Qwen/Qwen3-8B gpu 1", "metric": "ttft_p95_ms", "environment": "k8s"}, 2},
		{"gpuvet_baseline_overhead_percent", map[string]string{"subject": "Qwen/Qwen3-8B gpu 1", "metric": "ttft_p95_ms", "environment": "k8s"}, 14.2},
	}
	for _, c := range cases {
		if got := gauge(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	s := readSample(t)
	if got, want := gauge(t, fams, "gpuvet_sync_ttft_p95_seconds", ep("0")), s.Hosts[0].Models[0].Endpoints[0].Load.Runs[0].TTFT.P95/1000; got != want {
		t.Errorf("ttft = %v s, want %v", got, want)
	}
	if got := gauge(t, fams, "gpuvet_output_tokens_per_second_peak", ep("0")); got != s.Hosts[0].Models[0].Endpoints[0].Load.PeakOutputTokS {
		t.Errorf("peak tok/s = %v", got)
	}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "gpuvet_") || f.GetHelp() == "" {
			t.Errorf("metric %s: want a gpuvet_ name and a HELP line", f.GetName())
		}
	}
}

// Label values come from outside input: quotes, backslashes and newlines must be escaped.
func TestPrometheusEscapes(t *testing.T) {
	s := readSample(t)
	evil := "a\"b\\c\nd}{x=\"y\""
	s.Hosts[0].Name = evil
	s.Hosts[0].Models[0].Model = evil
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	fams := parseProm(t, b)
	if got := gauge(t, fams, "gpuvet_model_status", map[string]string{"host": evil, "model": evil}); got != 1 {
		t.Errorf("model status %v", got)
	}
}

// An inconclusive run has a sample of its own, between ok and flag: with none, an alert on the run
// status saw nothing at all for a run whose gates could not decide.
func TestPrometheusInconclusive(t *testing.T) {
	s := readSample(t)
	s.Status = results.StatusInconclusive
	s.Hosts[0].Models[0].Status = results.StatusInconclusive
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	fams := parseProm(t, b)
	if got := gauge(t, fams, "gpuvet_run_status", nil); got != 0.5 {
		t.Errorf("run status %v, want 0.5 (inconclusive)", got)
	}
	if got := gauge(t, fams, "gpuvet_model_status", map[string]string{"host": s.Hosts[0].Name, "model": s.Hosts[0].Models[0].Model}); got != 0.5 {
		t.Errorf("model status %v, want 0.5 (inconclusive)", got)
	}
}
