package config

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Leaf is one resolved value with its source.
type Leaf struct {
	Path   string
	Value  string
	Source string
}

// Leaves lists every resolved value in schema order (free maps sorted by key).
func (p *Plan) Leaves() []Leaf {
	var out []Leaf
	var rec func(v any, t reflect.Type, path string)
	rec = func(v any, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		m, isMap := v.(tree)
		switch {
		case isMap && t.Kind() == reflect.Struct && t != durationType:
			for i := 0; i < t.NumField(); i++ {
				k := yamlKey(t.Field(i))
				if e, ok := m[k]; ok {
					rec(e, t.Field(i).Type, joinPath(path, k))
				}
			}
		case isMap && t.Kind() == reflect.Map:
			if len(m) == 0 {
				out = append(out, Leaf{path, "{}", "default"})
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				rec(m[k], t.Elem(), joinPath(path, k))
			}
		default:
			out = append(out, Leaf{path, formatValue(v), cmp.Or(p.Sources[path], "default")})
		}
	}
	rec(p.tree, reflect.TypeFor[Config](), "")
	return out
}

func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null (disabled)"
	case string:
		if x == "" {
			return `""`
		}
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Show prints the resolved plan, one value a line with its source; then notes.
func (p *Plan) Show(w io.Writer) {
	leaves := p.Leaves()
	width := 0
	for _, l := range leaves {
		width = max(width, len(l.Path)+3+len(l.Value))
	}
	width = min(width, 72)
	for _, l := range leaves {
		kv := l.Path + " = " + results.RedactURLs(l.Value) // a URL's key-like query values
		fmt.Fprintf(w, "%-*s  # %s\n", width, kv, l.Source)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
}

// Settings returns the values worth recording in summary.json (everything but the free maps, which
// Thresholds and the reference table cover), each "value (source)".
func (p *Plan) Settings() map[string]string {
	out := map[string]string{}
	for _, l := range p.Leaves() {
		if strings.HasPrefix(l.Path, "reference") || strings.HasPrefix(l.Path, "accelerators") || strings.HasPrefix(l.Path, "engine.env") {
			continue
		}
		out[l.Path] = results.RedactURLs(l.Value) + " (" + l.Source + ")" // summary.json never holds a URL's key
	}
	return out
}

// LoadConfig is the plan's load profile with compare.min_samples, which sizes the rungs whose
// figures are gated (a min_samples of 0 asks for one completed request).
func (c Config) LoadConfig() results.LoadConfig {
	lc := c.Load.LoadConfig()
	lc.MinSamples = max(1, c.Compare.MinSamples)
	return lc
}

// LoadConfig converts the load section into the results schema's recorded profile.
func (l LoadProfile) LoadConfig() results.LoadConfig {
	return results.LoadConfig{
		Profile: l.Profile, API: l.API, PromptTokens: l.PromptTokens, OutputTokens: l.OutputTokens,
		MaxConcurrency: l.MaxConcurrency, Concurrency: l.Concurrency, Rate: l.Rate, Rates: l.Rates,
		MaxDuration: results.Duration(l.MaxDuration), Warmup: l.Warmup, Data: "synthetic", Seed: l.Seed,
		Reader: l.Reader, MaxRungDuration: results.Duration(l.MaxRungDuration), TimeBudget: results.Duration(l.TimeBudget),
		Workload: l.Workload, PrefixCount: l.PrefixCount, PrefixTokens: l.PrefixTokens, Trace: l.Trace, TraceSpeed: l.TraceSpeed, Turns: l.Turns, ContextMax: l.ContextMax,
	}
}
