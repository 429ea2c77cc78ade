package cuda

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

func TestFillRandom(t *testing.T) {
	b := make([]byte, 4096)
	FillRandom(b, false, 1)
	var lo, hi float32 = 1, -1
	for i := 0; i < len(b); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		if v < -1 || v >= 1 || math.IsNaN(float64(v)) {
			t.Fatalf("FP32 value %v out of [-1,1)", v)
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo > -0.9 || hi < 0.9 {
		t.Errorf("FP32 values not spread: [%v, %v]", lo, hi)
	}
	FillRandom(b, true, 1)
	for i := 0; i < len(b); i += 2 {
		v := math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[i:])) << 16)
		if v < -1 || v > 1 || math.IsNaN(float64(v)) {
			t.Fatalf("BF16 value %v out of [-1,1]", v)
		}
	}
}

func TestDescribeEveryName(t *testing.T) {
	r := &Runner{}
	for _, n := range Names {
		if r.Describe(n) == "" {
			t.Errorf("no description for %s", n)
		}
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	r, err := Open()
	if err == nil {
		r.Close()
		t.Skip("CUDA is present here")
	}
	if !strings.Contains(err.Error(), "libcuda.so.1") && !strings.Contains(err.Error(), "cuBLAS") {
		t.Errorf("err = %v, want one naming the missing library", err)
	}
}
