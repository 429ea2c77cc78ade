package config

import (
	"encoding/json"
	"fmt"
	"reflect"
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
	var args []string
	for _, k := range sortedKeys(r) {
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
// are leaves). Only the section is marshalled: the whole Config, with its reference tables, took
// 10 ms, once per engine of a Kubernetes run.
func leaves(c Config, section string) (map[string]any, error) {
	v, err := sectionOf(c, section)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
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
	walk(section, doc)
	return out, nil
}

// sectionOf is the field of Config whose YAML key is section.
func sectionOf(c Config, section string) (any, error) {
	v := reflect.ValueOf(c)
	for i := 0; i < v.NumField(); i++ {
		if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] == section {
			return v.Field(i).Interface(), nil
		}
	}
	return nil, fmt.Errorf("no config section %q", section)
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
