package cuda

import (
	"math"
	"strings"
	"testing"
	"time"
)

// cpuGEMM computes C = A·B (column-major n×n) the way a GPU might: FP32 accumulation in blocks of
// 16 (another order than the float64 reference), rounded to BF16 for the BF16 kind.
func cpuGEMM(kind gemmKind, n int, val func(int) float64) []float64 {
	c := make([]float64, n*n)
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			var acc float32
			for k0 := 0; k0 < n; k0 += 16 {
				var part float32
				for k := k0; k < min(n, k0+16); k++ {
					a, b := float32(val(k*n+i)), float32(val(j*n+k))
					if kind == gemmTF32 {
						a, b = roundTF32(a), roundTF32(b)
					}
					part += a * b
				}
				acc += part
			}
			v := float64(acc)
			if kind == gemmBF16 {
				bits := math.Float32bits(acc)
				bits += 0x7fff + (bits>>16)&1 // round to nearest even
				v = float64(math.Float32frombits(bits &^ 0xffff))
			}
			c[j*n+i] = v
		}
	}
	return c
}

func roundTF32(x float32) float32 {
	bits := math.Float32bits(x)
	bits += 0xfff + (bits>>13)&1
	return math.Float32frombits(bits &^ 0x1fff)
}

func TestTileCheckPassesACorrectGEMMAndCatchesAWrongElement(t *testing.T) {
	const n = 256
	for _, kind := range []gemmKind{gemmFP32, gemmTF32, gemmBF16} {
		bf16 := kind == gemmBF16
		chunk := make([]byte, 4096) // repeats, as fillRandom's chunk does on the GPU
		FillRandom(chunk, bf16, 1)
		val := func(idx int) float64 { return hostValue(chunk, bf16, idx) }
		c := cpuGEMM(kind, n, val)
		gpu := func(t, i int) float64 { return c[tileIndexes(n)[t]*n+i] }
		msg, bad := checkTileCPU(kind, n, val, val, gpu)
		if bad != 0 {
			t.Fatalf("kind %d: a correct GEMM failed the tile check: %s", kind, msg)
		}
		// One wrong element in the tile: a flipped exponent bit, and a 2 % error.
		j, i := tileIndexes(n)[3], tileIndexes(n)[5]
		for _, wrong := range []float64{c[j*n+i] * 2, c[j*n+i]*1.02 + 0.05} {
			bent := append([]float64(nil), c...)
			bent[j*n+i] = wrong
			msg, bad = checkTileCPU(kind, n, val, val, func(t, i int) float64 { return bent[tileIndexes(n)[t]*n+i] })
			if bad != 1 || !strings.Contains(msg, "1 beyond tolerance") {
				t.Errorf("kind %d: C[%d,%d] = %g instead of %g: bad = %d (%s), want 1", kind, i, j, wrong, c[j*n+i], bad, msg)
			}
		}
	}
}

func TestVerifierCountsMismatchesAndWhenTheyStarted(t *testing.T) {
	start := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	v := newVerifier("test", start)
	ref := []float32{1, 2, 3, 4}
	v.reference(ref)
	ref[0] = 99 // the verifier keeps its own copy
	for i := int64(1); i <= 5; i++ {
		v.compare([]float32{1, 2, 3, 4}, i, start.Add(time.Duration(i)*time.Second))
	}
	if c := v.result(); c.Checked != 5 || c.Mismatches != 0 || c.FirstMismatchS != nil || c.Failed() {
		t.Fatalf("equal results: %+v", c)
	}
	v.compare([]float32{1, 2, 3.0000002, 4}, 6, start.Add(6*time.Second)) // one ulp off
	v.compare([]float32{1, float32(math.NaN()), 3, 4}, 7, start.Add(7*time.Second))
	v.compare([]float32{1, 2, 3, 4}, 8, start.Add(8*time.Second))
	c := v.result()
	if c.Checked != 8 || c.Mismatches != 2 || !c.Failed() {
		t.Fatalf("checked %d mismatches %d, want 8 and 2", c.Checked, c.Mismatches)
	}
	if c.FirstMismatchS == nil || *c.FirstMismatchS != 6 || !c.FirstMismatchAt.Equal(start.Add(6*time.Second)) {
		t.Errorf("first mismatch at %v (%v), want 6 s", c.FirstMismatchS, c.FirstMismatchAt)
	}
	if !strings.Contains(c.MismatchDetail, "result 6: 1 of 4 row checksums differ") || !strings.Contains(c.MismatchDetail, "row 2") {
		t.Errorf("detail = %q", c.MismatchDetail)
	}
}

func TestChecksumWeightsAreExactInBF16AndNonzero(t *testing.T) {
	for k := 0; k < 300; k++ {
		w := checksumWeight(k)
		if w == 0 || math.Float32bits(w)&0xffff != 0 {
			t.Fatalf("weight %d = %v: zero or not exact in BF16", k, w)
		}
	}
}
