package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// hostileSummaries are small summary.json documents with what a wrong or hand-edited file may
// hold: GPU indexes that are negative or far apart, comparisons about GPUs the host does not
// list, empty and nil parts, figures at the edge of float64, a baseline whose columns and rows
// disagree, a fleet without hosts.
var hostileSummaries = []string{
	`{"schema_version":"1.0"}`,
	`{"schema_version":"1.0","hosts":[{}],"status":"ok","complete":true}`,
	`{"schema_version":"1.0","hosts":[{"name":"n","gpus":[{"index":-1,"status":"failed"},{"index":1000000,"status":"flag"}],
	 "discovery":{"gpus":[{"index":-5},{"index":7}]},
	 "health":{"status":"flag","gpus":[{"gpu":{"index":-1},"bench":[{"name":"gemm_bf16","value":1e308,"unit":"TFLOP/s","ratio":-1}],
	  "burn":{"samples":[{"t":-1,"power_w":1e308}]}}],
	  "comparisons":[{"metric":"gemm_bf16","values":[{"gpu":-1,"value":1e308,"delta_pct":-1e308,"flagged":true},{"gpu":99,"value":0,"inconclusive":true}]}],
	  "interconnect":{"pairs":[{"a":-1,"b":5,"path":"NV18"}],"links":[{"gpu":-3,"links":[{"link":0,"up":true}]}]}},
	 "models":[{"model":"<m>","status":"ok","endpoints":[{"gpus":[],"status":"ok","load":{"runs":[{"kind":"synchronous","ttft_ms":{"count":1,"p95":1e308},"requests":{"successful":-1}},{"kind":"constant","target_rate":-1,"ttft_ms":{"count":-1}}],"peak_output_tok_s":1e308,"saturation":{"truncated":true},"context":{}}},
	  {"gpus":[-1,1000000],"status":"failed","error":"a\nb","verdicts":[{"check":"gate.ttft_p95","result":"fail"}]}],
	  "comparisons":[{"metric":"ttft_p95_ms","low_confidence":true,"values":[{"gpu":-1},{"gpu":5,"inconclusive":true}]}]}]}],
	 "baseline":{"environments":["k8s","vm"],"environment_files":["a"],"rows":[{"subject":"s","metric":"ttft_p95_ms","status":{"k8s":"breach","zz":"ok"},"overhead_pct":{"vm":1e308}}]},
	 "fleet":{"comparisons":[{"metric":"x","values":[{"gpu":-1,"host":"ghost","flagged":true}]}],"skipped":[{"name":"","reason":""}],"node_actions":[{"node":"ghost"}]},
	 "findings":[{"layer":"gpu","status":"failed","gpus":[-1],"check":"c"},{"layer":"","status":"nonsense"}],
	 "layers":{"":"failed","zz":"weird"},"status":"weird","complete":false}`,
	`{"schema_version":"1.0","fleet":{},"hosts":[]}`,
	`{"schema_version":"1.0","timing":{"phases":[{"phase":"x","seconds":-1}]},"history":{"drift":[{"scope":"gpu","gpu":-7,"host":"zz"}],"trend":[{"host":"a","figures":{"":1e308}},{"host":"a","figures":{}}]},"hosts":[{"name":"a","detail_file":"../../etc/passwd"}]}`,
}

// FuzzRenderSummary: whatever a summary.json that parses holds, every surface renders it or says
// why not; none panics.
func FuzzRenderSummary(f *testing.F) {
	for _, s := range hostileSummaries {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "summary.json")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := results.Parse(b)
		if err != nil {
			return
		}
		renderAll(t, s)
	})
}

func renderAll(t *testing.T, s *results.Summary) {
	t.Helper()
	var h bytes.Buffer
	if err := RenderHTML(s, &h); err != nil {
		t.Fatal(err)
	}
	if _, err := JUnit(s); err != nil {
		t.Fatal(err)
	}
	if _, err := CTRF(s); err != nil {
		t.Fatal(err)
	}
	p, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	noDuplicateSeries(t, p)
}

// The hostile seeds are summaries gpuvet reads (a seed that does not parse tests nothing).
func TestHostileSummariesParse(t *testing.T) {
	for i, b := range hostileSummaries {
		if _, err := results.Parse([]byte(b)); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
