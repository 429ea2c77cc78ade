package config

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/results"
)

// aicr recipes (NVIDIA AI Cluster Runtime, kind RecipeMetadata) carry inference-perf knobs in
// spec.validation.performance.constraints as name/value pairs. gpuvet reads them so existing
// recipes work as they are:
//
//	inference-model                -> models: [value]
//	inference-concurrency-per-gpu  -> load.concurrency
//	inference-throughput ">= N"    -> gates.aicr_min_output_tok_s (a full-node floor, as aicr means it)
//	inference-ttft-p99   "<= N"    -> gates.aicr_max_ttft_p99_ms
//
// Other constraints (e.g. inference-routing-mode) belong to aicr's deployment and are noted.

// aicr's inference-perf check measures with AIPerf: 128 input and 128 output tokens, max(1000, 8 ×
// concurrency) requests after one warm-up per slot. Its thresholds were measured with that load, so
// the run that judges them uses it too.
const (
	AICRPromptTokens           = 128
	AICROutputTokens           = 128
	AICRMinRequests            = 1000
	AICRRequestsPerConcurrency = 8
)

// AICRLoad is the load of the aicr concurrency run at a concurrency, from a base profile (its API and
// seed are kept).
func AICRLoad(base results.LoadConfig, concurrency int) results.LoadConfig {
	c := base
	c.Profile, c.Concurrency = "concurrency", concurrency
	c.PromptTokens, c.PromptStdev, c.PromptMin, c.PromptMax = AICRPromptTokens, 0, 0, 0
	c.PrefixCount, c.PrefixTokens, c.Data = 0, 0, "synthetic"
	c.OutputTokens = AICROutputTokens
	c.MaxRequests = max(AICRMinRequests, AICRRequestsPerConcurrency*concurrency)
	c.MaxDuration = 0 // bounded by its request count, as AIPerf's --request-count is
	c.Warmup = strconv.Itoa(concurrency)
	return c
}

func isRecipe(root *yaml.Node) bool {
	return root.Kind == yaml.MappingNode && child(root, "kind") != nil && child(root, "kind").Value == "RecipeMetadata"
}

func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func recipeLayer(path string, root *yaml.Node) (tree, []string, error) {
	source := "recipe:" + path
	fail := func(n *yaml.Node, key, format string, args ...any) error {
		return &Error{Source: source, Line: n.Line, Path: key, Msg: fmt.Sprintf(format, args...)}
	}
	cons := child(child(child(child(root, "spec"), "validation"), "performance"), "constraints")
	layer := tree{}
	var notes []string
	// A recipe that deploys NVIDIA Dynamo's platform serves through it on backend kubernetes, as
	// aicr's inference check does (a DynamoGraphDeployment).
	if refs := child(child(root, "spec"), "componentRefs"); refs != nil && refs.Kind == yaml.SequenceNode {
		for _, c := range refs.Content {
			if n := child(c, "name"); n != nil && n.Value == "dynamo-platform" {
				setPath(layer, []string{"kubernetes", "dynamo"}, true)
			}
		}
	}
	if cons == nil {
		notes = append(notes, fmt.Sprintf("%s: aicr recipe without spec.validation.performance.constraints: nothing to read but its components", path))
		return layer, notes, nil
	}
	const where = "spec.validation.performance.constraints"
	if cons.Kind != yaml.SequenceNode {
		return nil, nil, fail(cons, where, "want a list of {name, value}, got %s", kindName(cons))
	}
	for i, c := range cons.Content {
		key := fmt.Sprintf("%s[%d]", where, i)
		name, val := child(c, "name"), child(c, "value")
		if name == nil || val == nil || val.Kind != yaml.ScalarNode {
			return nil, nil, fail(c, key, "want {name: ..., value: \"...\"}")
		}
		switch name.Value {
		case "inference-model":
			if strings.TrimSpace(val.Value) == "" {
				return nil, nil, fail(val, key, "inference-model is empty")
			}
			layer["models"] = []any{strings.TrimSpace(val.Value)}
		case "inference-concurrency-per-gpu":
			n, err := strconv.Atoi(strings.TrimSpace(val.Value))
			if err != nil || n < 1 {
				return nil, nil, fail(val, key, "inference-concurrency-per-gpu: want a positive integer, got %q", val.Value)
			}
			setPath(layer, []string{"load", "concurrency"}, int64(n))
		case "inference-throughput", "inference-ttft-p99": // a floor, a ceiling
			op, gate := ">=", "aicr_min_output_tok_s"
			if name.Value == "inference-ttft-p99" {
				op, gate = "<=", "aicr_max_ttft_p99_ms"
			}
			v, err := parseConstraint(val.Value, op)
			if err != nil {
				return nil, nil, fail(val, key, "%s: %v", name.Value, err)
			}
			setPath(layer, []string{"gates", gate}, v)
		default:
			notes = append(notes, fmt.Sprintf("%s: constraint %s=%q is aicr's deployment side; gpuvet does not use it", path, name.Value, val.Value))
		}
	}
	return layer, notes, nil
}

// parseConstraint reads "<op> N" (op optional) and insists on the operator the gate means.
func parseConstraint(s, op string) (float64, error) {
	s = strings.TrimSpace(s)
	for _, o := range []string{">=", "<=", ">", "<", "=="} {
		if strings.HasPrefix(s, o) {
			if o != op {
				return 0, fmt.Errorf("want %q N, got %q", op, s)
			}
			s = strings.TrimSpace(s[len(o):])
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0 && v <= 1e300) { // NaN and infinity too, as a config file's numbers
		return 0, fmt.Errorf("want %q followed by a non-negative number, got %q", op, s)
	}
	return v, nil
}
