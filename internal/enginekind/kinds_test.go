package enginekind

import (
	"slices"
	"strings"
	"testing"
)

// Every built-in template names the port gpuvet picks and the model; every kind with a template
// has a version command; names are unique; generic is the one kind without a template.
func TestTableIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds {
		if seen[k.Name] {
			t.Errorf("%s twice", k.Name)
		}
		seen[k.Name] = true
		if k.Template == "" {
			if k.Name != "generic" {
				t.Errorf("%s: no template", k.Name)
			}
			continue
		}
		if !strings.Contains(k.Template, "{port}") || !strings.Contains(k.Template, "{model}") || k.VersionCommand == "" {
			t.Errorf("%s: template %q / version %q", k.Name, k.Template, k.VersionCommand)
		}
	}
	if got := List(); got != "vllm, sglang, trtllm, transformers or generic" {
		t.Errorf("List() = %q", got)
	}
}

// The images and gauges the Kubernetes backend and the load generator read come from the table.
func TestImagesAndGauges(t *testing.T) {
	for _, tc := range []struct{ kind, version, want string }{
		{"vllm", "0.11.0", "vllm/vllm-openai:v0.11.0"}, {"vllm", "v0.11.0", "vllm/vllm-openai:v0.11.0"}, {"vllm", "", "vllm/vllm-openai:latest"},
		{"sglang", "0.5.2", "lmsysorg/sglang:0.5.2"}, {"trtllm", "", "nvcr.io/nvidia/tensorrt-llm/release:latest"},
	} {
		if got := Get(tc.kind).Image(tc.version); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.kind, tc.version, got, tc.want)
		}
	}
	if Get("generic").Image != nil || Get("transformers").Image != nil || Get("nope").Template != "" {
		t.Error("a kind without an image got one")
	}
	g := AllGauges()
	if g.Running[0] != "vllm:num_requests_running" || !slices.Contains(g.Waiting, "sglang:num_queue_reqs") || g.KVUsage[1] != "vllm:gpu_cache_usage_perc" {
		t.Errorf("gauges %+v", g)
	}
	if !Get("vllm").Dynamo || Get("sglang").Dynamo || Get("generic").HubWeights || !Get("trtllm").HubWeights {
		t.Error("dynamo / hub weights")
	}
}
