package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// GPU names users type (issue 42): the judge looks reference entries and floors up by the detected
// name ("NVIDIA H200"), users type the catalog's short name ("H200") just as often. Accelerator
// keys already match by words (config.Plan.ForGPU); keys that name no GPU of the run are said after
// discovery (unusedGPUKeys).

// exactGPU finds a catalog GPU by its key or one of its detected names, case-insensitively, with
// no guessing: a key that only contains a GPU's name is not that GPU.
func exactGPU(cat *catalog.Catalog, key string) (catalog.GPU, bool) {
	k := strings.TrimSpace(key)
	for _, g := range cat.GPUs() {
		if strings.EqualFold(g.Key, k) {
			return g, true
		}
		for _, n := range g.Names {
			if strings.EqualFold(n, k) {
				return g, true
			}
		}
	}
	return catalog.GPU{}, false
}

func gpuNames(cat *catalog.Catalog) []string {
	var out []string
	for _, g := range cat.GPUs() {
		out = append(out, g.Key)
		out = append(out, g.Names...)
	}
	return out
}

// unknownGPUKey is the error for a key that names no GPU of the catalog.
func unknownGPUKey(cat *catalog.Catalog, table, key string) error {
	hint := "a catalog short name (" + strings.Join(cat.GPUKeys(), ", ") + ") or a detected name such as \"NVIDIA H200\""
	if c, ok := config.Closest(key, gpuNames(cat)); ok {
		hint = fmt.Sprintf("did you mean %q? (%s)", c, hint)
	}
	return fmt.Errorf("%w: %s: %q is not a GPU of the catalog: %s", ErrBadInput, table, key, hint)
}

// ResolveGPUNames validates the GPU keys of c and expands short names of reference and
// reference_floors into the detected names of their GPU (Preflight; `gpuvet health -c`).
func ResolveGPUNames(c *config.Config, cat *catalog.Catalog) error {
	for _, k := range slices.Sorted(maps.Keys(c.Accelerators)) {
		if _, ok := exactGPU(cat, k); !ok && !acceleratorNamesSome(cat, k) {
			return unknownGPUKey(cat, "accelerators", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Reference)) {
		g, ok := exactGPU(cat, k)
		if !ok {
			return unknownGPUKey(cat, "reference", k)
		}
		expand(c.Reference, k, g)
	}
	for _, k := range slices.Sorted(maps.Keys(c.ReferenceFloors)) {
		g, ok := exactGPU(cat, k)
		if !ok {
			return unknownGPUKey(cat, results.ThFloors, k)
		}
		expand(c.ReferenceFloors, k, g)
	}
	return nil
}

// acceleratorNamesSome reports whether an accelerators key names some GPU of the catalog the way
// accelerator keys match ("h100" for "NVIDIA H100 80GB HBM3").
func acceleratorNamesSome(cat *catalog.Catalog, key string) bool {
	for _, g := range cat.GPUs() {
		for _, n := range g.Names {
			if config.AcceleratorMatches(key, n) {
				return true
			}
		}
	}
	return false
}

// expand moves the entry under key to each detected name of g that has none of its own; a key that
// is a detected name already (in its exact spelling) stays.
func expand[V any](m map[string]V, key string, g catalog.GPU) {
	if slices.Contains(g.Names, key) {
		return
	}
	v := m[key]
	delete(m, key)
	for _, n := range g.Names {
		if _, own := m[n]; !own {
			m[n] = v
		}
	}
}

// unusedGPUKeys are the caveats for GPU keys of reference, reference_floors and accelerators that
// match no GPU this run found: their entries were not used (a typo of a model id, or a recipe for
// another node).
func unusedGPUKeys(c config.Config, cat *catalog.Catalog, found []results.GPUInfo) []string {
	if len(found) == 0 {
		return nil
	}
	here := map[string]bool{}
	var names []string
	for _, g := range found {
		if cg, ok := cat.LookupGPU(g.Name); ok {
			here[cg.Key] = true
		}
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
	}
	var out []string
	said := map[string]bool{}
	check := func(table string, keys []string) {
		for _, k := range keys {
			g, ok := exactGPU(cat, k)
			if !ok {
				if cg, fuzzy := cat.LookupGPU(k); fuzzy {
					g = cg
				} else {
					continue
				}
			}
			if here[g.Key] || said[table+g.Key] {
				continue
			}
			said[table+g.Key] = true
			out = append(out, fmt.Sprintf("%s: the entries for %s match no GPU of this run (%s): not used", table, g.Key, strings.Join(names, ", ")))
		}
	}
	check("reference", slices.Sorted(maps.Keys(c.Reference)))
	check(results.ThFloors, slices.Sorted(maps.Keys(c.ReferenceFloors)))
	check("accelerators", slices.Sorted(maps.Keys(c.Accelerators)))
	return out
}
