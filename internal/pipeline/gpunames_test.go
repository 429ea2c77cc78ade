package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 42: reference, reference_floors and accelerators take the catalog's short names and the
// detected names alike; a key naming no GPU of the catalog is bad input with the closest name; a
// key naming no GPU of this run is a caveat.
func TestGPUNamesUsersType(t *testing.T) {
	ttft := 100.0
	c := config.Config{
		Reference:       map[string]config.ModelRefs{"H200": {"Qwen/Qwen3-8B": {TTFTP95Ms: &ttft}}},
		ReferenceFloors: map[string]map[string]float64{"h200": {"gemm_bf16": 1.4}, "NVIDIA H100 80GB HBM3": {"gemm_bf16": 0.5}},
		Accelerators:    map[string]config.Accelerator{"h100": {}, "NVIDIA H200": {}},
	}
	if err := ResolveGPUNames(&c, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Reference["NVIDIA H200"]["Qwen/Qwen3-8B"]; !ok || len(c.Reference) != 1 {
		t.Errorf("reference keys %v, want the detected name", c.Reference)
	}
	if c.ReferenceFloors["NVIDIA H200"]["gemm_bf16"] != 1.4 || c.ReferenceFloors["NVIDIA H100 80GB HBM3"]["gemm_bf16"] != 0.5 {
		t.Errorf("floors %v", c.ReferenceFloors)
	}
	for table, bad := range map[string]config.Config{
		"reference":        {Reference: map[string]config.ModelRefs{"H2000": {}}},
		"reference_floors": {ReferenceFloors: map[string]map[string]float64{"NVIDIA H20O": {}}},
		"accelerators":     {Accelerators: map[string]config.Accelerator{"x999": {}}},
	} {
		err := ResolveGPUNames(&bad, nil)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), table+":") || !strings.Contains(err.Error(), "not a GPU of the catalog") {
			t.Errorf("%s: %v", table, err)
		}
		if table != "accelerators" && !strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%s: no did-you-mean: %v", table, err)
		}
	}
	found := []results.GPUInfo{{Index: 0, Name: "NVIDIA H200"}}
	cav := unusedGPUKeys(c, nil, found)
	if len(cav) != 2 || !strings.Contains(strings.Join(cav, "\n"), "reference_floors: the entries for H100 match no GPU of this run (NVIDIA H200): not used") ||
		!strings.Contains(strings.Join(cav, "\n"), "accelerators: the entries for H100") {
		t.Errorf("caveats %q", cav)
	}
}
