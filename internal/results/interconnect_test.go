package results

import "testing"

// The topology matrix is GPUs × GPUs: a summary that claims thousands of GPUs on a host (a wrong
// or hand-made file) gets none, rather than the square of its count in memory and on the page.
func TestMatrixBounded(t *testing.T) {
	ic := &Interconnect{Pairs: []GPUPair{{A: 0, B: 1, Path: "NV18"}}}
	if m := ic.Matrix(2); len(m) != 3 || m[1][2] != "NV18" || m[2][1] != "NV18" || m[1][1] != "X" {
		t.Errorf("2 GPUs: %q", m)
	}
	if m := ic.Matrix(MaxMatrixGPUs); len(m) != MaxMatrixGPUs+1 {
		t.Errorf("%d GPUs: %d rows", MaxMatrixGPUs, len(m))
	}
	if m := ic.Matrix(MaxMatrixGPUs + 1); m != nil {
		t.Errorf("%d GPUs: a matrix of %d rows", MaxMatrixGPUs+1, len(m))
	}
}
