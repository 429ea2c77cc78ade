package fleet

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 52: a node gpuvet drained was resumed by an ok run on 2 of its 8 GPUs without health.
// Only a run that served every GPU found, with its health phase, vets the node whole.
func TestNotVettedWhole(t *testing.T) {
	host := func(found, served int, health bool) results.Host {
		h := results.Host{Name: "n"}
		for i := range found {
			h.Discovery.GPUs = append(h.Discovery.GPUs, results.GPUInfo{Index: i})
		}
		m := results.Model{Model: "m"}
		for i := range served {
			m.Endpoints = append(m.Endpoints, results.Endpoint{GPUs: []int{i}})
		}
		h.Models = []results.Model{m}
		if health {
			h.Health = &results.Health{Status: results.StatusOK}
		}
		return h
	}
	for _, tc := range []struct {
		h    results.Host
		want string
	}{
		{host(8, 8, true), ""},
		{host(8, 2, false), "served 2 of its 8 GPUs and had no health phase"},
		{host(8, 2, true), "served 2 of its 8 GPUs"},
		{host(8, 8, false), "no health phase"},
		{host(0, 0, false), "no GPU was found"},
	} {
		got := NotVettedWhole(tc.h)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%d found, %d served, health %v: %q, want %q", len(tc.h.Discovery.GPUs), len(tc.h.Models[0].Endpoints), tc.h.Health != nil, got, tc.want)
		}
	}
}
