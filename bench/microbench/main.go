// Command microbench runs gpuvet's own microbenchmarks (internal/cuda, the code `gpuvet health` runs)
// at given sizes and prints one JSON line per figure, for bench/microbench_vs_torch.py to set side by
// side with PyTorch on the same card.
//
//	go run ./bench/microbench -gpu 0 sgemm_fp32:8192 gemm_tf32:0 hbm_d2d:1073741824
//
// Each argument is name:size (n for GEMMs, bytes for copies; 0 = the size `gpuvet health` uses).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/cuda"
	"github.com/gpuvet/gpuvet/internal/results"
)

type figure struct {
	Tool   string  `json:"tool"`
	Name   string  `json:"name"`
	Size   int     `json:"size"` // 0: gpuvet health's default
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Detail string  `json:"detail,omitempty"`
	Error  string  `json:"error,omitempty"`
}

func main() {
	gpu := flag.Int("gpu", 0, "CUDA device ordinal")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: microbench [-gpu N] name:size … (names: "+strings.Join(cuda.Names, ", ")+")")
		os.Exit(2)
	}
	type job struct {
		name string
		size int
	}
	var jobs []job
	for _, a := range flag.Args() {
		name, sz, ok := strings.Cut(a, ":")
		n, err := strconv.Atoi(sz)
		if !ok || err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "argument %q: want name:size with size ≥ 0\n", a)
			os.Exit(2)
		}
		jobs = append(jobs, job{name, n})
	}
	r, err := cuda.Open()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer r.Close()
	enc := json.NewEncoder(os.Stdout)
	g := results.GPUInfo{Index: *gpu}
	for _, j := range jobs {
		v, unit, err := r.MicrobenchSized(context.Background(), g, j.name, j.size)
		f := figure{Tool: "gpuvet", Name: j.name, Size: j.size, Value: v, Unit: unit}
		if j.size == 0 {
			f.Detail = r.Describe(j.name)
		}
		if err != nil {
			f.Error = err.Error()
		}
		enc.Encode(f)
	}
}
