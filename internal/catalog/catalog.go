package catalog

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// Catalog is a set of GPUs and models. It is a value that is passed to whoever needs figures (the
// simulator, the health phase, the nvidia-smi XML reader), never a process-wide table: a catalog
// file given to one command changes that command's catalog only, and nothing is changed once built,
// so a Catalog is safe for concurrent use.
//
// A nil *Catalog is the built-in one, so zero-value configs need not name it.
type Catalog struct {
	gpus   []GPU
	models []Model
}

var builtin = &Catalog{gpus: builtinGPUs, models: builtinModels}

// Builtin is the catalog compiled into gpuvet (see gpus.go and models.go for the sources).
func Builtin() *Catalog { return builtin }

func (c *Catalog) orBuiltin() *Catalog { return cmp.Or(c, builtin) }

// LoadFile reads a catalog extension file and returns base with its entries added or replacing
// base's (same key / id: replaced as a whole, in place). base is not changed. An error names the
// file and the field path.
func LoadFile(base *Catalog, path string) (*Catalog, error) {
	b, err := filelimit.Read(path, filelimit.Catalog, "catalog file")
	if err != nil {
		return nil, fmt.Errorf("catalog file: %w", err)
	}
	f, err := ParseFile(b)
	if err != nil {
		return nil, fmt.Errorf("catalog file %s: %w", path, err)
	}
	return base.Merge(f), nil
}

// Merge returns a new catalog: c with f's GPUs and models added or replacing c's (same key / id,
// case-insensitively). c is not changed.
func (c *Catalog) Merge(f *File) *Catalog {
	c = c.orBuiltin()
	out := &Catalog{gpus: append([]GPU(nil), c.gpus...), models: append([]Model(nil), c.models...)}
	for _, g := range f.GPUs {
		out.gpus = replace(out.gpus, g, func(a GPU) bool { return strings.EqualFold(a.Key, g.Key) })
	}
	for _, m := range f.Models {
		out.models = replace(out.models, m, func(a Model) bool { return strings.EqualFold(a.ID, m.ID) })
	}
	return out
}

// replace puts v where same is true, or appends it.
func replace[T any](s []T, v T, same func(T) bool) []T {
	for i := range s {
		if same(s[i]) {
			s[i] = v
			return s
		}
	}
	return append(s, v)
}

// GPUs lists the GPUs in table order (a copy).
func (c *Catalog) GPUs() []GPU { return append([]GPU(nil), c.orBuiltin().gpus...) }

// Models lists the models in table order (a copy).
func (c *Catalog) Models() []Model { return append([]Model(nil), c.orBuiltin().models...) }

// LookupGPU finds a GPU by exact nvidia-smi name or by key, case-insensitively; failing both, by the
// longest key contained in the name ("NVIDIA H100 80GB HBM3" -> H100). ok is false when nothing fits.
func (c *Catalog) LookupGPU(name string) (GPU, bool) {
	gpus := c.orBuiltin().gpus
	n := strings.ToLower(strings.TrimSpace(name))
	for _, g := range gpus {
		if strings.ToLower(g.Key) == n || slices.ContainsFunc(g.Names, func(full string) bool { return strings.ToLower(full) == n }) {
			return g, true
		}
	}
	// Fuzzy: the longest key whose words appear whole in the name, so "H200 NVL" wins over "H200",
	// and an L40 is no L4 nor a GH200 an H200 (other datasheets).
	words := " " + strings.Join(strings.FieldsFunc(n, notAlnum), " ") + " "
	cands := append([]GPU(nil), gpus...)
	sort.SliceStable(cands, func(i, j int) bool { return len(cands[i].Key) > len(cands[j].Key) })
	for _, g := range cands {
		k := strings.Join(strings.FieldsFunc(strings.ToLower(g.Key), notAlnum), " ")
		if k != "" && strings.Contains(words, " "+k+" ") {
			return g, true
		}
	}
	return GPU{}, false
}

func notAlnum(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// LookupModel finds a model by its exact id, case-insensitively.
func (c *Catalog) LookupModel(id string) (Model, bool) {
	for _, m := range c.orBuiltin().models {
		if strings.EqualFold(m.ID, strings.TrimSpace(id)) {
			return m, true
		}
	}
	return Model{}, false
}

// GPUKeys lists the GPU keys, for help and error messages.
func (c *Catalog) GPUKeys() []string {
	return names(c.orBuiltin().gpus, func(g GPU) string { return g.Key })
}

// ModelIDs lists the model ids, for help and error messages.
func (c *Catalog) ModelIDs() []string {
	return names(c.orBuiltin().models, func(m Model) string { return m.ID })
}

func names[T any](s []T, name func(T) string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = name(v)
	}
	return out
}
