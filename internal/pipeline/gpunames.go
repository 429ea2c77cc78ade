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

// The judge looks reference entries and floors up by the detected name ("NVIDIA H200"); users type
// the catalog's short name ("H200") just as often.

// exactGPU finds a catalog GPU by its key or one of its detected names, case-insensitively, with
// no guessing: a key that only contains a GPU's name is not that GPU.
func exactGPU(cat *catalog.Catalog, key string) (catalog.GPU, bool) {
	same := func(n string) bool { return strings.EqualFold(n, strings.TrimSpace(key)) }
	for _, g := range cat.GPUs() {
		if same(g.Key) || slices.ContainsFunc(g.Names, same) {
			return g, true
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
	return badInput("%s: %q is not a GPU of the catalog: %s", table, key, hint)
}

// ResolveGPUNames validates the GPU keys of c and expands short names of reference and
// reference_floors into the detected names of their GPU (Preflight; `gpuvet health -c`).
func ResolveGPUNames(c *config.Config, cat *catalog.Catalog) error {
	for _, k := range slices.Sorted(maps.Keys(c.Accelerators)) {
		if _, ok := exactGPU(cat, k); !ok && !acceleratorNamesSome(cat, k) {
			return unknownGPUKey(cat, "accelerators", k)
		}
	}
	if err := expandGPUKeys(cat, "reference", c.Reference); err != nil {
		return err
	}
	return expandGPUKeys(cat, results.ThFloors, c.ReferenceFloors)
}

// acceleratorNamesSome reports whether an accelerators key names some GPU of the catalog the way
// accelerator keys match ("h100" for "NVIDIA H100 80GB HBM3").
func acceleratorNamesSome(cat *catalog.Catalog, key string) bool {
	return slices.ContainsFunc(cat.GPUs(), func(g catalog.GPU) bool {
		return slices.ContainsFunc(g.Names, func(n string) bool { return config.AcceleratorMatches(key, n) })
	})
}

// expandGPUKeys moves each entry of table m to each detected name of its GPU that has none of its
// own; a key that is a detected name already (in its exact spelling) stays.
func expandGPUKeys[V any](cat *catalog.Catalog, table string, m map[string]V) error {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		g, ok := exactGPU(cat, key)
		if !ok {
			return unknownGPUKey(cat, table, key)
		}
		if slices.Contains(g.Names, key) {
			continue
		}
		v := m[key]
		delete(m, key)
		for _, n := range g.Names {
			if _, own := m[n]; !own {
				m[n] = v
			}
		}
	}
	return nil
}

// unusedGPUKeys are the caveats for GPU keys of reference, reference_floors and accelerators that
// match no GPU this run found.
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
