package cuda

import (
	"encoding/binary"
	"errors"
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

func TestBusBW(t *testing.T) {
	// nccl-tests: busbw = algbw × 2(n−1)/n.
	for _, c := range []struct{ n, want float64 }{{2, 100}, {4, 150}, {8, 175}} {
		if got := BusBW(100, int(c.n)); got != c.want {
			t.Errorf("n=%v: %v, want %v", c.n, got, c.want)
		}
	}
	if BusBW(100, 1) != 0 {
		t.Error("one rank has no bus traffic")
	}
}

func TestNCCLVersion(t *testing.T) {
	for code, want := range map[int]string{22803: "2.28.3", 21903: "2.19.3", 2708: "2.7.8"} {
		if got := NCCLVersion(code); got != want {
			t.Errorf("%d: %s, want %s", code, got, want)
		}
	}
}

func TestFindNCCLSaysWhereToPoint(t *testing.T) {
	if _, _, err := FindNCCL("/nonexistent/libnccl.so.2"); err == nil || !strings.Contains(err.Error(), "--nccl-lib /nonexistent") {
		t.Errorf("a named library that does not load: %v", err)
	}
	t.Setenv("LD_LIBRARY_PATH", "")
	_, lib, err := FindNCCL("")
	if err == nil {
		t.Skipf("this host has a libnccl (%s)", lib)
	}
	if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "--nccl-lib") {
		t.Errorf("no NCCL: %v", err)
	}
}
