package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// Options are the inputs of a Plan.
type Options struct {
	Files   []string // -c, in order; later files overlay earlier ones
	Sets    []string // --set key=value, in order
	Environ []string // os.Environ(); only GPUVET_* entries are read
	// Flags are named command-line flags mapped to keys (e.g. --out -> output.dir), applied last.
	Flags []Flag
}

// Flag is one named command-line flag that sets a key.
type Flag struct {
	Name  string // "--out"
	Path  string // "output.dir"
	Value string
}

// Plan is the resolved configuration: every value with its source.
type Plan struct {
	Config  Config
	Sources map[string]string // key path -> "default", "default(sim)", "env:GPUVET_…", "config:FILE", "recipe:FILE", "flag:--set"
	Notes   []string          // e.g. recipe constraints gpuvet does not use
	// EndpointURLKey is the password endpoint.url carried (removed from it): the API key when
	// endpoint.api_key_env's variable is empty. Never recorded.
	EndpointURLKey string
	// OpenNebulaEndpoint is opennebula.endpoint with its user:password@ (a proxy's basic auth),
	// for the client only; the config's value, which outputs record, is without them.
	OpenNebulaEndpoint string
	tree               tree
}

// Load resolves a Plan from defaults, environment, files and flags. Any error is an *Error naming
// the source, the key path and what is allowed; nothing has started yet (exit 2).
func Load(o Options) (*Plan, error) {
	p := &Plan{Sources: map[string]string{}}
	t, err := toTree(Defaults(), "default", p.Sources)
	if err != nil {
		return nil, err
	}
	p.tree = t
	if err := p.applyEnv(o.Environ); err != nil {
		return nil, err
	}
	for _, f := range o.Files {
		if err := p.applyFile(f); err != nil {
			return nil, err
		}
	}
	if err := p.applySets(o.Sets); err != nil {
		return nil, err
	}
	for _, fl := range o.Flags {
		if err := p.set(fl.Path, fl.Value, "flag:"+fl.Name); err != nil {
			return nil, err
		}
	}
	if err := p.resolve(); err != nil {
		return nil, err
	}
	return p, nil
}

// applySets applies --set key=value overrides (source "flag:--set").
func (p *Plan) applySets(sets []string) error {
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return &Error{Source: "flag --set", Msg: fmt.Sprintf("want key=value, got %q", s)}
		}
		if err := p.set(strings.TrimSpace(k), v, "flag:--set"); err != nil {
			return err
		}
	}
	return nil
}

// resolve turns the merged tree into the checked Config (Load's and With's last step).
func (p *Plan) resolve() error {
	if p.simulated() {
		p.applySimDefaults()
	}
	c, err := decode(p.tree)
	if err != nil {
		return fmt.Errorf("config: internal decode error (a bug): %w", err)
	}
	p.Config = c
	p.stripEndpointCredentials()
	p.stripOpenNebulaCredentials()
	if err := validate(p.Config, p.Sources, ""); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Accelerators)) {
		ac, src, _ := p.ForGPU(name)
		if err := validate(ac, src, joinPath("accelerators", name)); err != nil {
			return err
		}
	}
	return nil
}

// simulated says the run's GPUs are the simulator's (backend sim, or a fleet whose hosts run it):
// they get its short defaults.
func (p *Plan) simulated() bool {
	return backendkind.Of(remoteBackend(p.tree)).Simulated
}

// remoteBackend is the backend that runs the plan t on each GPU host: the plan's, or for a fleet
// whose hosts run their own (its row's RemoteKey), theirs.
func remoteBackend(t tree) string {
	b, _ := t["backend"].(string)
	if key := backendkind.Of(b).RemoteKey; key != "" {
		return text(t, key)
	}
	return b
}

// Text is the resolved text value of key ("" when it is not text, or unset).
func (p *Plan) Text(key string) string { return text(p.tree, key) }

func text(t tree, key string) string {
	segs, _ := splitPath(key)
	var v any = t
	for _, s := range segs {
		m, _ := v.(tree)
		v = m[s]
	}
	s, _ := v.(string)
	return s
}

func (p *Plan) applySimDefaults() {
	for path, v := range simDefaults {
		if p.Sources[path] != "default" {
			continue
		}
		segs, _ := splitPath(path)
		setPath(p.tree, segs, v)
		p.Sources[path] = "default(sim)"
	}
}

// applyFile overlays one YAML file, or an aicr recipe (kind: RecipeMetadata) read for its
// validation.performance.constraints.
func (p *Plan) applyFile(path string) error {
	b, err := filelimit.Read(path, filelimit.Config, "config")
	if err != nil {
		return &Error{Source: "config:" + path, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	return p.applyBytes(path, b)
}

func (p *Plan) applyBytes(path string, b []byte) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.Notes = append(p.Notes, fmt.Sprintf("warning: config file %s is empty: nothing overlaid", path))
			return nil
		}
		return &Error{Source: "config:" + path, Msg: fmt.Sprintf("not valid YAML: %v", err)}
	}
	if err := oneDocument(dec, path); err != nil {
		return err
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if isRecipe(root) {
		layer, notes, err := recipeLayer(path, root)
		if err != nil {
			return err
		}
		p.Notes = append(p.Notes, notes...)
		merge(p.tree, layer, "", p.Sources)
		eachLeaf(layer, nil, func(segs []string, _ any) { p.Sources[pathOf(segs...)] = "recipe:" + path })
		return nil
	}
	src := map[string]string{}
	w := &walker{source: "config:" + path, sources: src}
	v, err := w.walk(root, reflect.TypeFor[Config](), "")
	if err != nil {
		return err
	}
	p.overlay(v.(tree), src)
	return nil
}

// oneDocument refuses a file with a second YAML document (after ---): its keys would never apply.
func oneDocument(dec *yaml.Decoder, path string) error {
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return &Error{Source: "config:" + path, Msg: fmt.Sprintf("not valid YAML: %v", err)}
		case len(next.Content) > 0 && !emptyNode(next.Content[0]):
			return &Error{Source: "config:" + path, Line: next.Line, Msg: "a config file holds one YAML document; this is a second (after ---): merge it into the first, or give it as another -c file"}
		}
	}
}

// emptyNode is a document with nothing in it (a trailing --- alone).
func emptyNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == ""
}

// overlay merges a layer and records its sources (after merge dropped the replaced ones).
func (p *Plan) overlay(layer tree, src map[string]string) {
	merge(p.tree, layer, "", p.Sources)
	for k, v := range src {
		p.Sources[k] = v
	}
}

// eachLeaf calls fn with the path segments (after segs) and value of every leaf under v.
func eachLeaf(v any, segs []string, fn func(segs []string, v any)) {
	if m, ok := v.(tree); ok {
		for k, e := range m {
			eachLeaf(e, append(slices.Clone(segs), k), fn)
		}
		return
	}
	fn(segs, v)
}

// pathOf is the key path of segs.
func pathOf(segs ...string) string {
	path := ""
	for _, s := range segs {
		path = joinPath(path, s)
	}
	return path
}

// set applies one key=value (from --set, a named flag, or the environment).
func (p *Plan) set(key, value, source string) error {
	segs, err := splitPath(key)
	if err != nil {
		return &Error{Source: source, Path: key, Msg: err.Error()}
	}
	t, err := typeAt(reflect.TypeFor[Config](), segs)
	if err != nil {
		return &Error{Source: source, Path: key, Msg: err.Error()}
	}
	path := pathOf(segs...)
	n, err := valueNode(t, value)
	if err != nil {
		return &Error{Source: source, Path: path, Msg: err.Error()}
	}
	src := map[string]string{}
	w := &walker{source: source, sources: src}
	v, err := w.walk(n, t, path)
	if err != nil {
		return err
	}
	layer := tree{}
	setPath(layer, segs, v)
	p.overlay(layer, src)
	return nil
}

// valueNode turns a command-line value into a YAML node for type t: strings and durations literally
// ("{port}" stays a string), lists as "a,b" or "[a, b]", everything else as YAML.
func valueNode(t reflect.Type, value string) (*yaml.Node, error) {
	lit := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	if t.Kind() == reflect.String || t == durationType {
		return lit(value), nil
	}
	if t.Kind() == reflect.Slice && !strings.HasPrefix(strings.TrimSpace(value), "[") {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		if strings.TrimSpace(value) != "" {
			for _, part := range strings.Split(value, ",") {
				seq.Content = append(seq.Content, lit(strings.TrimSpace(part)))
			}
		}
		return seq, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
		return nil, fmt.Errorf("not a valid value: %w", err)
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}, nil
	}
	return doc.Content[0], nil
}

// envKeys lists every key settable from the environment: struct leaves and lists, not free maps.
func envKeys() map[string]string {
	out := map[string]string{}
	var rec func(t reflect.Type, path string)
	rec = func(t reflect.Type, path string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			p := joinPath(path, yamlKey(f))
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				rec(ft, p)
				if ft == modelCacheType { // GPUVET_MODEL_CACHE=off, like model_cache: off
					out["GPUVET_"+strings.ToUpper(strings.ReplaceAll(p, ".", "_"))] = p
				}
			case ft.Kind() == reflect.Map:
			default:
				out["GPUVET_"+strings.ToUpper(strings.ReplaceAll(p, ".", "_"))] = p
			}
		}
	}
	rec(reflect.TypeFor[Config](), "")
	return out
}

// otherEnv are GPUVET_ variables that are not config keys (a new one goes here, or it is a typo).
var otherEnv = map[string]bool{
	"GPUVET_CHROMIUM":        true, // report: the Chromium that prints the PDF
	"GPUVET_STATE_DIR":       true, // fleet: where run manifests live
	"GPUVET_ENGINE_ID":       true, // engine: the marker on an engine's processes
	"GPUVET_ENGINE_WATCHDOG": true, // engine: set on gpuvet re-executed as an engine's watchdog
	"GPUVET_CPUPROFILE":      true, // cmd/gpuvet: a CPU profile of the process, for engineers
	"GPUVET_HEAPPROFILE":     true, // cmd/gpuvet: the heap profile at the peak, for engineers
}

// applyEnv reads GPUVET_<PATH> variables. One that is no config key is an error naming the closest
// key: a typo must not silently run the default.
func (p *Plan) applyEnv(environ []string) error {
	keys := envKeys()
	vals := map[string]string{}
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "GPUVET_") {
			vals[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		path, ok := keys[k]
		if !ok {
			if otherEnv[k] || strings.HasPrefix(k, "GPUVET_TEST_") {
				continue
			}
			msg := "not a config key (GPUVET_<KEY> maps to a key, e.g. GPUVET_LOAD_MAX_CONCURRENCY = load.max_concurrency); unset it or fix the name"
			if near, ok := Closest(k, slices.Collect(maps.Keys(keys))); ok {
				msg = fmt.Sprintf("not a config key; did you mean %s (%s)?", near, keys[near])
			}
			return &Error{Source: "env:" + k, Msg: msg}
		}
		if err := p.set(path, vals[k], "env:"+k); err != nil {
			return err
		}
	}
	return nil
}

// Source returns where the value at path came from.
func (p *Plan) Source(path string) string { return p.Sources[path] }

// ForGPU is the one place a GPU's settings are resolved: the config for a GPU of this exact name,
// with every matching accelerators entry overlaid, least specific first (acceleratorMatches; the
// exact name last), under what flags set. It returns the config, its sources, and the most specific
// accelerators key used ("" when none).
func (p *Plan) ForGPU(name string) (Config, map[string]string, string) {
	keys := matchAccelerators(p.Config.Accelerators, name)
	src := maps.Clone(p.Sources)
	if len(keys) == 0 {
		return p.Config, src, ""
	}
	acc, _ := p.tree["accelerators"].(tree)
	t := deepCopy(p.tree).(tree)
	for _, key := range keys {
		sub, _ := acc[key].(tree)
		overlayAccelerator(t, src, p.Sources, key, sub)
	}
	c, err := decode(t)
	if err != nil {
		return p.Config, maps.Clone(p.Sources), ""
	}
	return c, src, keys[len(keys)-1]
}

// overlayAccelerator sets every leaf of one accelerators entry into t, unless a flag set that key.
func overlayAccelerator(t tree, src, planSrc map[string]string, key string, sub tree) {
	eachLeaf(sub, nil, func(rel []string, v any) {
		path := pathOf(rel...)
		if strings.HasPrefix(src[path], "flag:") {
			return
		}
		dropSources(src, path)
		setPath(t, rel, deepCopy(v))
		src[path] = "accelerator:" + key + " (" + planSrc[pathOf(append([]string{"accelerators", key}, rel...)...)] + ")"
	})
}

// matchAccelerators returns the accelerators keys that name this GPU, shorter first, the exact name
// last.
func matchAccelerators(acc map[string]Accelerator, name string) []string {
	var keys []string
	for k := range acc {
		if k != name && acceleratorMatches(k, name) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(len(a)-len(b), strings.Compare(a, b)) })
	if _, ok := acc[name]; ok {
		keys = append(keys, name)
	}
	return keys
}

// AcceleratorMatches is acceleratorMatches for the checks outside config.
func AcceleratorMatches(key, gpuName string) bool { return acceleratorMatches(key, gpuName) }

// acceleratorMatches reports whether an accelerator key names this GPU: its words appear in the GPU
// name's words, consecutively and in order, ignoring case, dashes and underscores ("h100" matches
// "NVIDIA H100 80GB HBM3"; "h20" does not match "NVIDIA H200").
func acceleratorMatches(key, gpuName string) bool {
	kw, gw := words(key), words(gpuName)
	if len(kw) == 0 {
		return false
	}
	for i := 0; i+len(kw) <= len(gw); i++ {
		if slices.Equal(gw[i:i+len(kw)], kw) {
			return true
		}
	}
	return false
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
}
