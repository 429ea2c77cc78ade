package config

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A tree is a schema-checked generic form of (part of) a Config: map[string]any for structs and
// maps, []any for lists, typed scalars (nil for null). Layers merge into one that decodes into Config.
type tree = map[string]any

// Error is a configuration error: where it came from, the key path, and what is allowed.
type Error struct {
	Source string // "config:a.yaml", "flag --set", "env GPUVET_X", "recipe:r.yaml"
	Line   int    // 0 when unknown
	Path   string // e.g. load.max_concurrency
	Msg    string
}

// Error reads as the user wrote it ("a.yaml:3: load.rates: …", "--set load.rates: …"); a long
// value it quotes is cut, never echoed whole.
func (e *Error) Error() string {
	loc, flag, ownLine := e.Source, false, true
	for _, p := range []string{"config:", "env:", "flag:", "flag "} {
		if rest, ok := strings.CutPrefix(loc, p); ok {
			// A flag's or variable's "line" is the value's own: never a line of a file.
			loc, flag, ownLine = rest, strings.HasPrefix(p, "flag"), p == "config:"
		}
	}
	if rest, ok := strings.CutPrefix(loc, "recipe:"); ok {
		loc = "recipe " + rest
	}
	if e.Line > 0 && ownLine {
		loc += ":" + strconv.Itoa(e.Line)
	}
	msg := ClipQuoted(e.Msg)
	switch {
	case e.Path == "":
		return fmt.Sprintf("%s: %s", loc, msg)
	case flag && loc == "--set":
		return fmt.Sprintf("--set %s: %s", clip(e.Path), msg)
	case flag:
		return fmt.Sprintf("%s (%s): %s", loc, clip(e.Path), msg) // a named flag and the key it sets
	}
	return fmt.Sprintf("%s: %s: %s", loc, clip(e.Path), msg)
}

// maxEcho is how much of a value or key an error repeats: enough to recognise it.
const maxEcho = 60

// quotedRe matches a Go-quoted string (%q) in a message.
var quotedRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// ClipQuoted cuts every quoted value in msg longer than maxEcho, saying how long it was.
func ClipQuoted(msg string) string {
	return quotedRe.ReplaceAllStringFunc(msg, func(q string) string {
		s, err := strconv.Unquote(q)
		if err != nil || len(s) <= maxEcho {
			return q
		}
		return fmt.Sprintf("%q (%d bytes)", clip(s), len(s))
	})
}

// clip keeps the first maxEcho bytes of s (on a rune boundary) and marks the cut.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

var (
	durationType   = reflect.TypeFor[Duration]()
	gpusAtOnceType = reflect.TypeFor[GPUsAtOnce]()
	modelCacheType = reflect.TypeFor[ModelCache]()
)

// joinPath appends one key to a path; keys that are not plain identifiers are quoted.
func joinPath(path, key string) string {
	if isIdent(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// splitPath parses "a.b[\"x.y\"].c" into [a b x.y c].
func splitPath(p string) ([]string, error) {
	var out []string
	for i := 0; i < len(p); {
		switch {
		case p[i] == '.':
			if i == 0 || i == len(p)-1 {
				return nil, fmt.Errorf("key %q: empty part", p)
			}
			i++
			if p[i] == '.' || p[i] == '[' {
				return nil, fmt.Errorf("key %q: empty part", p)
			}
		case p[i] == '[':
			end := strings.Index(p[i:], "]")
			if end < 0 {
				return nil, fmt.Errorf("key %q: unclosed [", p)
			}
			k, err := strconv.Unquote(p[i+1 : i+end])
			if err != nil {
				return nil, fmt.Errorf("key %q: inside [...] want a quoted string like [\"NVIDIA H200\"]", p)
			}
			out = append(out, k)
			i += end + 1
			if i < len(p) && p[i] != '.' && p[i] != '[' {
				return nil, fmt.Errorf("key %q: want . or [ after ]", p)
			}
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			out = append(out, p[i:j])
			i = j
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty key")
	}
	return out, nil
}

// fieldByKey returns the struct field whose yaml tag is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if yamlKey(t.Field(i)) == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func yamlKey(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	if i := strings.IndexByte(tag, ','); i >= 0 {
		tag = tag[:i]
	}
	return tag
}

func allowedKeys(t reflect.Type) string {
	var ks []string
	for i := 0; i < t.NumField(); i++ {
		ks = append(ks, yamlKey(t.Field(i)))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// walker converts a YAML node into a tree checked against a Go type, recording each leaf's source.
type walker struct {
	source  string
	sources map[string]string
}

func (w *walker) fail(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{Source: w.source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return strconv.Quote(n.Value)
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) (any, error) {
	if n.Kind == yaml.AliasNode {
		return nil, w.fail(n, path, "YAML aliases are not supported: write the value out")
	}
	if t.Kind() == reflect.Pointer {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			w.sources[path] = w.source
			return nil, nil
		}
		return w.walk(n, t.Elem(), path)
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return nil, w.fail(n, path, "want a duration like \"20s\", got %s", kindName(n))
		}
		if _, err := parseDuration(n.Value); err != nil {
			return nil, w.fail(n, path, "%v", err)
		}
		w.sources[path] = w.source
		return n.Value, nil
	}
	if t == gpusAtOnceType {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return nil, w.fail(n, path, "want auto or a GPU count ≥ 1, got %s", kindName(n))
		}
		v, err := parseGPUsAtOnce(n.Value)
		if err != nil {
			return nil, w.fail(n, path, "%v", err)
		}
		w.sources[path] = w.source
		if v.Auto() {
			return "auto", nil
		}
		return int64(v), nil
	}
	if t == modelCacheType && n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		m, err := modelCacheShorthand(n)
		if err != nil {
			return nil, w.fail(n, path, "%v", err)
		}
		n = m
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		isMap := t.Kind() == reflect.Map
		if isMap && n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return tree{}, nil
		}
		if n.Kind != yaml.MappingNode && isMap {
			return nil, w.fail(n, path, "want a map, got %s", kindName(n))
		} else if n.Kind != yaml.MappingNode {
			return nil, w.fail(n, path, "want a map with keys %s; got %s", allowedKeys(t), kindName(n))
		}
		out := tree{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var et reflect.Type
			if isMap {
				if k.Kind != yaml.ScalarNode || k.Value == "" {
					return nil, w.fail(k, path, "want a non-empty string key")
				}
				et = t.Elem()
			} else if sf, ok := fieldByKey(t, k.Value); ok {
				et = sf.Type
			} else {
				return nil, w.fail(k, joinPath(path, k.Value), "unknown key; allowed here: %s", allowedKeys(t))
			}
			if _, dup := out[k.Value]; dup {
				return nil, w.fail(k, joinPath(path, k.Value), "key given twice")
			}
			val, err := w.walk(v, et, joinPath(path, k.Value))
			if err != nil {
				return nil, err
			}
			out[k.Value] = val
		}
		return out, nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil, w.fail(n, path, "want a list like [a, b], got %s", kindName(n))
		}
		inner := &walker{source: w.source, sources: map[string]string{}}
		out := []any{}
		for i, c := range n.Content {
			val, err := inner.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		w.sources[path] = w.source // lists replace as a whole: one source for the list
		return out, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, w.fail(n, path, "want %s, got %s", typeName(t), kindName(n))
	}
	v, err := scalar(n, t)
	if err != nil {
		return nil, w.fail(n, path, "%v", err)
	}
	w.sources[path] = w.source
	return v, nil
}

// modelCacheShorthand reads `model_cache: off` as {dir: off}; any other scalar is an error.
func modelCacheShorthand(n *yaml.Node) (*yaml.Node, error) {
	switch strings.ToLower(n.Value) {
	case "off", "false":
		str := func(v string) *yaml.Node {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: n.Line}
		}
		return &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Content: []*yaml.Node{str("dir"), str("off")}}, nil
	}
	return nil, fmt.Errorf("want off, or a map with keys %s; got %s", allowedKeys(modelCacheType), kindName(n))
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return t.String()
}

func scalar(n *yaml.Node, t reflect.Type) (any, error) {
	if n.Tag == "!!null" && t.Kind() != reflect.String {
		return nil, fmt.Errorf("want %s, got null", typeName(t))
	}
	switch t.Kind() {
	case reflect.String:
		if n.Tag == "!!null" {
			return "", nil
		}
		return n.Value, nil
	case reflect.Int, reflect.Int64:
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %q", n.Value)
		}
		if t.Kind() == reflect.Int && int64(int(v)) != v {
			return nil, fmt.Errorf("integer %d out of range", v)
		}
		return v, nil
	case reflect.Float64:
		v, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || v != v || v > 1e300 || v < -1e300 {
			return nil, fmt.Errorf("want a number, got %q", n.Value)
		}
		return v, nil
	case reflect.Bool:
		switch strings.ToLower(n.Value) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		return nil, fmt.Errorf("want true or false, got %q", n.Value)
	}
	return nil, fmt.Errorf("unsupported type %s", t)
}

// merge overlays src onto dst: maps merge recursively, everything else replaces (dropping the
// replaced subtrees' sources).
func merge(dst, src tree, path string, sources map[string]string) {
	for k, v := range src {
		p := joinPath(path, k)
		if sm, ok := v.(tree); ok {
			if dm, ok := dst[k].(tree); ok {
				merge(dm, sm, p, sources)
				continue
			}
			dropSources(sources, p)
			dst[k] = deepCopy(sm)
			continue
		}
		dropSources(sources, p)
		dst[k] = deepCopy(v)
	}
}

func dropSources(sources map[string]string, p string) {
	for k := range sources {
		if k == p || strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[") {
			delete(sources, k)
		}
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case tree:
		out := make(tree, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// toTree converts a value of the schema (e.g. Defaults()) into a tree, recording source for each leaf.
func toTree(v any, source string, sources map[string]string) (tree, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	w := &walker{source: source, sources: sources}
	out, err := w.walk(n.Content[0], reflect.TypeOf(v), "")
	if err != nil {
		return nil, err
	}
	return out.(tree), nil
}

// decode turns a merged tree into a Config.
func decode(t tree) (Config, error) {
	var c Config
	b, err := yaml.Marshal(t)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	err = dec.Decode(&c)
	return c, err
}

// setPath sets a value at path segments in a tree, creating maps on the way.
func setPath(t tree, segs []string, v any) {
	for _, s := range segs[:len(segs)-1] {
		next, ok := t[s].(tree)
		if !ok {
			next = tree{}
			t[s] = next
		}
		t = next
	}
	t[segs[len(segs)-1]] = v
}

// typeAt returns the Go type at path segments in the schema.
func typeAt(t reflect.Type, segs []string) (reflect.Type, error) {
	for i, s := range segs {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			if t == durationType {
				return nil, fmt.Errorf("%s is a value, not a map", strings.Join(segs[:i], "."))
			}
			f, ok := fieldByKey(t, s)
			if !ok {
				return nil, fmt.Errorf("unknown key %q; allowed here: %s", s, allowedKeys(t))
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, fmt.Errorf("%s is a value, not a map", strings.Join(segs[:i], "."))
		}
	}
	return t, nil
}
