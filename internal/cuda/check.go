package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The result check of the GEMMs (issue 33), as gpu-burn does it: a GPU that computes wrong answers
// fast is the worst GPU there is. Every GEMM of a burn writes the same C = A·B (same operands, same
// cuBLAS call), and cuBLAS gives bit-identical results run to run on one GPU (its documented
// reproducibility: same toolkit, same architecture, no atomics mode), so each result's row checksum
// C·v (a second, tiny GEMM on the GPU, in FP32) must equal the first result's bit for bit. The first
// result is itself checked against a tile recomputed on the CPU in float64, within the tolerance of
// the GEMM's precision. This file is the pure part; bench.go drives the GPU.

// checkTile is the tile of C recomputed on the CPU: tileSide rows × tileSide columns.
const checkTile = 8

// checksumWeight is v[k] in the row checksum C·v: nonzero (a changed element always moves its
// row's sum), varied, and exact in BF16 (1 + m/128 with m < 128 has 7 mantissa bits).
func checksumWeight(k int) float32 { return 1 + float32(k%127)/128 }

// verifier compares row checksums with the reference and counts what differs.
type verifier struct {
	ref   []float32
	start time.Time
	c     results.ResultCheck
}

func newVerifier(method string, start time.Time) *verifier {
	return &verifier{start: start, c: results.ResultCheck{Method: method}}
}

// reference sets the checksum every later result must equal.
func (v *verifier) reference(sum []float32) { v.ref = append([]float32(nil), sum...) }

// compare checks result number iter (counted from 1 after the reference) read at now.
func (v *verifier) compare(sum []float32, iter int64, now time.Time) {
	v.c.Checked++
	diff, first := 0, -1
	for i := range v.ref {
		if i >= len(sum) || math.Float32bits(sum[i]) != math.Float32bits(v.ref[i]) {
			diff++
			if first < 0 {
				first = i
			}
		}
	}
	if diff == 0 {
		return
	}
	v.c.Mismatches++
	if v.c.FirstMismatchS != nil {
		return
	}
	s := now.Sub(v.start).Seconds()
	at := now.UTC()
	v.c.FirstMismatchS, v.c.FirstMismatchAt = &s, &at
	got := float32(math.NaN())
	if first < len(sum) {
		got = sum[first]
	}
	v.c.MismatchDetail = fmt.Sprintf("result %d: %d of %d row checksums differ from the first result's; row %d: %g, reference %g",
		iter, diff, len(v.ref), first, got, v.ref[first])
}

func (v *verifier) result() *results.ResultCheck { c := v.c; return &c }

// hostValue is element idx of a buffer filled by fillRandom: the host chunk repeated.
func hostValue(chunk []byte, bf16 bool, idx int) float64 {
	return deviceValue(chunk[idx*elemBytes(bf16)%len(chunk):], bf16, 0)
}

// deviceValue decodes element i of a column copied back from the GPU.
func deviceValue(col []byte, bf16 bool, i int) float64 {
	if bf16 {
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(col[2*i:])) << 16))
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(col[4*i:])))
}

// tileIndexes are the rows (and columns) of the tile: spread over the matrix, not on a stride
// that lines up with the repeated host chunk.
func tileIndexes(n int) []int {
	out := make([]int, checkTile)
	for t := range out {
		out[t] = (t*n/checkTile + 3*t + 1) % n
	}
	return out
}

// tolerance is how far a correct GPU element may lie from the float64 reference: the output's
// rounding (BF16: 8 bits, FP32: 24), TF32's input rounding (10 mantissa bits on each operand), and
// FP32 accumulation in another order (a random walk over k additions), each with a wide margin;
// s2 = √Σ(a·b)² is the scale of the sum's terms.
func tolerance(kind gemmKind, ref, s2 float64, k int) float64 {
	out, prod := math.Ldexp(1, -24), 0.0
	switch kind {
	case gemmBF16:
		out = math.Ldexp(1, -8)
	case gemmTF32:
		prod = math.Ldexp(1, -10)
	}
	return 2*out*math.Abs(ref) + 8*prod*s2 + 8*math.Sqrt(float64(k))*math.Ldexp(1, -24)*s2 + 1e-6
}

// checkTileCPU recomputes C[i,j] = Σ_k A[i,k]·B[k,j] (column-major n×n) for the tile on the CPU and
// compares each with the GPU's value (gpu(t, i): row i of the tile's column t). It returns what it
// found and how many elements lie beyond their tolerance.
func checkTileCPU(kind gemmKind, n int, a, b func(idx int) float64, gpu func(t, i int) float64) (string, int) {
	idx := tileIndexes(n)
	bad, worst, worstTol := 0, 0.0, 1.0
	first := ""
	for t, j := range idx {
		for _, i := range idx {
			var sum, sq float64
			for k := 0; k < n; k++ {
				p := a(k*n+i) * b(j*n+k)
				sum += p
				sq += p * p
			}
			got := gpu(t, i)
			tol := tolerance(kind, sum, math.Sqrt(sq), n)
			err := math.Abs(got - sum)
			if math.IsNaN(got) || math.IsInf(got, 0) {
				err = math.Inf(1)
			}
			if err/tol > worst/worstTol {
				worst, worstTol = err, tol
			}
			if err > tol {
				bad++
				if first == "" {
					first = fmt.Sprintf("; first C[%d,%d] = %g, CPU %g", i, j, got, sum)
				}
			}
		}
	}
	return fmt.Sprintf("%d elements of the first result recomputed on the CPU (float64): %d beyond tolerance, largest error %.3g (%.2g of its tolerance)%s",
		len(idx)*len(idx), bad, worst, worst/worstTol, first), bad
}
