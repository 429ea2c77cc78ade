package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SetArgs returns the `--set KEY=VALUE` arguments that turn base's section (e.g. "load") into
// resolved's: one pair for each leaf that differs, in key order. A gpuvet run elsewhere that is
// given base as its plan (a Kubernetes load Job) and these arguments measures with resolved's
// settings (a GPU's accelerators entry) exactly: --set wins over everything in a plan. A list or
// map leaf is written in YAML flow form (JSON), a string as it is.
func SetArgs(base, resolved Config, section string) ([]string, error) {
	b, err := leaves(base, section)
	if err != nil {
		return nil, err
	}
	r, err := leaves(resolved, section)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		if reflect.DeepEqual(b[k], r[k]) {
			continue
		}
		v, err := flowValue(r[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		args = append(args, "--set", k+"="+v)
	}
	return args, nil
}

// leaves is c's section as dotted keys ("load.rates") to YAML values (lists and maps of lists
// are leaves).
func leaves(c Config, section string) (map[string]any, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, sub := range m {
				walk(prefix+"."+k, sub)
			}
			return
		}
		out[prefix] = v
	}
	if v, ok := doc[section]; ok {
		walk(section, v)
	}
	return out, nil
}

// flowValue writes a leaf the way --set reads it back (valueNode): a string literally, anything
// else as YAML, lists and maps in flow form.
func flowValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case map[string]any, []any:
		b, err := json.Marshal(x)
		return strings.TrimSpace(string(b)), err
	default:
		return fmt.Sprint(x), nil
	}
}
