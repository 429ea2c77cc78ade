package cuda

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Benchmark sizes, chosen on an H200 side by side with PyTorch (docs/microbench-h200.md): each is the
// size at which cuBLAS reaches its best on that card. SGEMM follows the seed (n=16384, 1 warm-up + 10
// timed); TF32 peaks at n=8192 (about 12 % above n=16384) and BF16 at n=4096 (about 3 % above 8192),
// each with enough iterations to run for a tenth of a second or more; copies follow the seed's PCIe test
// (256 MiB × 20). The burn keeps n=8192: it must hold the card at full power, not peak for a moment.
const (
	sgemmN       = 16384
	sgemmWarmup  = 1
	sgemmIters   = 10
	tf32N        = 8192
	tf32Warmup   = 5
	tf32Iters    = 50
	bf16N        = 4096
	bf16Warmup   = 20
	bf16Iters    = 300
	burnN        = 8192
	pcieBytes    = 256 << 20
	pcieIters    = 20
	hbmBytes     = 2 << 30
	hbmIters     = 20
	burnBatch    = 20 // GEMMs between checks of the context during a burn
	stagingBytes = 64 << 20
)

// Runner runs microbenchmarks on real GPUs. One primary context and one cuBLAS handle per GPU,
// made on first use; safe for one goroutine per GPU at a time (--parallel).
type Runner struct {
	a    *api
	mu   sync.Mutex
	devs map[string]*device
}

type device struct {
	mu   sync.Mutex // one benchmark at a time per GPU
	ord  int32
	ctx  uintptr
	blas uintptr
}

// Open loads libcuda.so.1 and cuBLAS. The error names what is missing and what to do.
func Open() (*Runner, error) {
	a, err := load()
	if err != nil {
		return nil, err
	}
	return &Runner{a: a, devs: map[string]*device{}}, nil
}

// Library says which cuBLAS was loaded, for the record.
func (r *Runner) Library() string { return r.a.cublasLib }

// Describe says what a benchmark does, with its sizes.
func (r *Runner) Describe(name string) string {
	switch name {
	case "sgemm_fp32":
		return fmt.Sprintf("cublasSgemm n=%d, %d warm-up + %d timed, CUDA events", sgemmN, sgemmWarmup, sgemmIters)
	case "gemm_tf32":
		return fmt.Sprintf("cublasSgemm with cublasSetMathMode(TF32_TENSOR_OP_MATH), n=%d, %d+%d iterations", tf32N, tf32Warmup, tf32Iters)
	case "gemm_bf16":
		return fmt.Sprintf("cublasGemmEx BF16 in/out, compute 32F, n=%d, %d+%d iterations", bf16N, bf16Warmup, bf16Iters)
	case "pcie_h2d", "pcie_d2h":
		return fmt.Sprintf("pinned (cuMemAllocHost) %d MiB × %d", pcieBytes>>20, pcieIters)
	case "hbm_d2d":
		return fmt.Sprintf("cuMemcpyDtoD %d GiB × %d, read+write counted", hbmBytes>>30, hbmIters)
	}
	return ""
}

// bind makes the GPU's primary context current on this OS thread (the caller has locked it).
func (r *Runner) bind(g results.GPUInfo) (*device, error) {
	key := cmp.Or(g.PCIBusID, fmt.Sprint("#", g.Index))
	r.mu.Lock()
	d, ok := r.devs[key]
	if !ok {
		d = &device{}
		r.devs[key] = d
	}
	r.mu.Unlock()
	a := r.a
	if d.ctx == 0 {
		ord, err := a.ordinal(g)
		if err != nil {
			return nil, err
		}
		var ctx uintptr
		if err := a.cuErr("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&ctx, ord)); err != nil {
			return nil, err
		}
		d.ord, d.ctx = ord, ctx
	}
	if err := a.cuErr("cuCtxSetCurrent", a.cuCtxSetCurrent(d.ctx)); err != nil {
		return nil, err
	}
	if d.blas == 0 {
		var h uintptr
		if err := blasErr("cublasCreate", a.cublasCreate(&h)); err != nil {
			return nil, err
		}
		d.blas = h
	}
	return d, nil
}

// Microbench runs one benchmark on one GPU and returns its figure: TFLOP/s for GEMMs, GB/s for copies.
func (r *Runner) Microbench(ctx context.Context, g results.GPUInfo, name string) (float64, string, error) {
	return r.MicrobenchSized(ctx, g, name, 0)
}

// MicrobenchSized is Microbench at another size: n for GEMMs, bytes for copies (0: the default). The
// side-by-side harness (bench/microbench) uses it to sweep sizes against other tools.
func (r *Runner) MicrobenchSized(ctx context.Context, g results.GPUInfo, name string, size int) (float64, string, error) {
	v, unit, _, err := r.checkedMicrobench(ctx, g, name, size)
	return v, unit, err
}

// CheckedMicrobench is Microbench with the GEMMs' answer checked (check.go): the last timed
// result's row checksum against the first result's, and the first against a CPU tile. Copies
// return no check.
func (r *Runner) CheckedMicrobench(ctx context.Context, g results.GPUInfo, name string) (float64, string, *results.ResultCheck, error) {
	return r.checkedMicrobench(ctx, g, name, 0)
}

func (r *Runner) checkedMicrobench(ctx context.Context, g results.GPUInfo, name string, size int) (float64, string, *results.ResultCheck, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", nil, err
	}
	// The CUDA context is per OS thread: the whole benchmark must stay on this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := r.bind(g)
	if err != nil {
		return 0, "", nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	or := func(def int) int {
		if size > 0 {
			return size
		}
		return def
	}
	if g, ok := gemms[name]; ok {
		v, c, err := r.gemm(d, g.kind, or(g.n), g.warmup, g.iters)
		return v, "TFLOP/s", c, err
	}
	switch name {
	case "pcie_h2d", "pcie_d2h":
		v, err := r.pcie(name == "pcie_h2d", uint64(or(pcieBytes)))
		return v, "GB/s", nil, err
	case "hbm_d2d":
		v, err := r.hbm(uint64(or(hbmBytes)))
		return v, "GB/s", nil, err
	}
	return 0, "", nil, fmt.Errorf("unknown microbenchmark %q (known: %s)", name, strings.Join(results.MicrobenchNames(), ", "))
}

// Burn runs BF16 GEMM flat out until ctx ends and returns the TFLOP/s it sustained.
func (r *Runner) Burn(ctx context.Context, g results.GPUInfo) (float64, error) {
	v, _, err := r.CheckedBurn(ctx, g)
	return v, err
}

// CheckedBurn is Burn with every GEMM's answer checked (check.go): each result's row checksum
// against the first result's, bit for bit, and the first result against a tile recomputed on the CPU.
func (r *Runner) CheckedBurn(ctx context.Context, g results.GPUInfo) (float64, *results.ResultCheck, error) {
	start := time.Now()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := r.bind(g)
	if err != nil {
		return 0, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m, err := r.newGEMM(d, gemmBF16, burnN)
	if err != nil {
		return 0, nil, err
	}
	defer m.free()
	ck, err := r.newChecker(m, burnBatch)
	if err != nil {
		return 0, nil, err
	}
	defer ck.free()
	v := newVerifier(fmt.Sprintf("every GEMM's row checksum C·v (cuBLAS, FP32) equal bit for bit to the first result's; "+
		"the first result checked against a %d×%d tile recomputed on the CPU", checkTile, checkTile), start)
	if err := r.reference(m, ck, v); err != nil {
		return 0, v.result(), err
	}
	var flops, secs float64
	var iter int64
	for ctx.Err() == nil {
		slot := 0
		s, err := r.timed(burnBatch, func() error {
			if err := m.run(); err != nil {
				return err
			}
			slot++
			return ck.sum(slot - 1)
		})
		if err != nil {
			return rate(flops, secs), v.result(), err
		}
		sums, err := ck.read(burnBatch)
		if err != nil {
			return rate(flops, secs), v.result(), err
		}
		now := time.Now()
		for _, sum := range sums {
			iter++
			v.compare(sum, iter, now)
		}
		flops += 2 * math.Pow(burnN, 3) * burnBatch
		secs += s
	}
	return rate(flops, secs), v.result(), nil
}

// reference computes the first result, sets its checksum as the reference and checks a tile of it
// on the CPU.
func (r *Runner) reference(m *gemmBufs, ck *checker, v *verifier) error {
	if err := m.run(); err != nil {
		return err
	}
	if err := ck.sum(0); err != nil {
		return err
	}
	sums, err := ck.read(1)
	if err != nil {
		return err
	}
	v.reference(sums[0])
	tile, bad, err := r.tile(m)
	if err != nil {
		v.c.Error = "tile check: " + err.Error()
		return nil
	}
	v.c.Tile, v.c.TileMismatches = tile, bad
	return nil
}

func rate(flops, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return flops / secs / 1e12
}

// Close releases cuBLAS handles and primary contexts.
func (r *Runner) Close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r.mu.Lock()
	defer r.mu.Unlock()
	var list []error
	for _, d := range r.devs {
		if d.ctx == 0 {
			continue
		}
		r.a.cuCtxSetCurrent(d.ctx)
		if d.blas != 0 {
			list = append(list, blasErr("cublasDestroy", r.a.cublasDestroy(d.blas)))
		}
		list = append(list, r.a.cuErr("cuDevicePrimaryCtxRelease", r.a.cuDevicePrimaryCtxRelease(d.ord)))
	}
	r.devs = map[string]*device{}
	return errors.Join(list...)
}

type gemmKind int

// gemms are the GEMM benchmarks: kind, default size, warm-up and timed iterations.
var gemms = map[string]struct {
	kind             gemmKind
	n, warmup, iters int
}{
	"sgemm_fp32": {gemmFP32, sgemmN, sgemmWarmup, sgemmIters},
	"gemm_tf32":  {gemmTF32, tf32N, tf32Warmup, tf32Iters},
	"gemm_bf16":  {gemmBF16, bf16N, bf16Warmup, bf16Iters},
}

const (
	gemmFP32 gemmKind = iota
	gemmTF32
	gemmBF16
)

// gemmBufs holds A, B, C of one square GEMM on the device.
type gemmBufs struct {
	r       *Runner
	d       *device
	kind    gemmKind
	n       int
	a, b, c uint64
	// host is the random chunk every buffer was filled with (repeated): the CPU tile check reads
	// A and B from it.
	host []byte
}

func (r *Runner) newGEMM(d *device, kind gemmKind, n int) (*gemmBufs, error) {
	size := uint64(n) * uint64(n) * uint64(elemBytes(kind == gemmBF16))
	m := &gemmBufs{r: r, d: d, kind: kind, n: n}
	for _, p := range []*uint64{&m.a, &m.b, &m.c} {
		if err := r.a.cuErr(fmt.Sprintf("cuMemAlloc %d MiB for GEMM n=%d", size>>20, n), r.a.cuMemAlloc(p, size)); err != nil {
			m.free()
			return nil, err
		}
	}
	// Random operands: constant ones would understate power draw during a burn.
	m.host = make([]byte, min(uint64(stagingBytes), size))
	FillRandom(m.host, kind == gemmBF16, 1)
	for _, p := range []uint64{m.a, m.b, m.c} {
		if err := r.fill(p, size, m.host); err != nil {
			m.free()
			return nil, err
		}
	}
	return m, nil
}

func (m *gemmBufs) free() {
	for _, p := range []uint64{m.a, m.b, m.c} {
		if p != 0 {
			m.r.a.cuMemFree(p)
		}
	}
}

// run enqueues one C = A·B (column-major, no transpose).
func (m *gemmBufs) run() error {
	a, n := m.r.a, int32(m.n)
	alpha, beta := float32(1), float32(0)
	switch m.kind {
	case gemmFP32:
		if err := blasErr("cublasSetMathMode", a.cublasSetMathMode(m.d.blas, cublasDefaultMath)); err != nil {
			return err
		}
		return blasErr("cublasSgemm", a.cublasSgemm(m.d.blas, cublasOpN, cublasOpN, n, n, n, &alpha, m.a, n, m.b, n, &beta, m.c, n))
	case gemmTF32:
		// TF32 tensor math on the FP32 entry point: cuBLAS picks its best TF32 kernels this way (measured
		// 455 TFLOP/s on an H200 against 364 through cublasGemmEx with COMPUTE_32F_FAST_TF32).
		if err := blasErr("cublasSetMathMode TF32", a.cublasSetMathMode(m.d.blas, cublasTF32TensorMath)); err != nil {
			return err
		}
		return blasErr("cublasSgemm (TF32)", a.cublasSgemm(m.d.blas, cublasOpN, cublasOpN, n, n, n, &alpha, m.a, n, m.b, n, &beta, m.c, n))
	default:
		return blasErr("cublasGemmEx BF16", a.cublasGemmEx(m.d.blas, cublasOpN, cublasOpN, n, n, n, unsafe.Pointer(&alpha),
			m.a, cudaR16BF, n, m.b, cudaR16BF, n, unsafe.Pointer(&beta), m.c, cudaR16BF, n, cublasCompute32F, cublasGemmDefaultTensor))
	}
}

// gemm times iters GEMMs after warmup and checks the answer: the first result (after the warm-up)
// is the reference and is checked against a CPU tile, the last timed one must equal it bit for bit.
func (r *Runner) gemm(d *device, kind gemmKind, n, warmup, iters int) (float64, *results.ResultCheck, error) {
	m, err := r.newGEMM(d, kind, n)
	if err != nil {
		return 0, nil, err
	}
	defer m.free()
	ck, err := r.newChecker(m, 1)
	if err != nil {
		return 0, nil, err
	}
	defer ck.free()
	v := newVerifier(fmt.Sprintf("the last timed result's row checksum C·v equal bit for bit to the first result's; "+
		"the first result checked against a %d×%d tile recomputed on the CPU", checkTile, checkTile), time.Now())
	if _, err := r.timed(warmup, m.run); err != nil {
		return 0, nil, err
	}
	if err := r.reference(m, ck, v); err != nil {
		return 0, v.result(), err
	}
	secs, err := r.timed(iters, m.run)
	if err != nil {
		return 0, v.result(), err
	}
	if err := ck.sum(0); err != nil {
		return 0, v.result(), err
	}
	sums, err := ck.read(1)
	if err != nil {
		return 0, v.result(), err
	}
	v.compare(sums[0], int64(warmup+iters), time.Now())
	return rate(2*math.Pow(float64(n), 3)*float64(iters), secs), v.result(), nil
}

// timed enqueues body iters times between two CUDA events on the default stream and returns the
// seconds between them.
func (r *Runner) timed(iters int, body func() error) (float64, error) {
	return r.a.span(0, "a kernel or copy failed", fmt.Sprintf("%d iterations", iters), func(uintptr) error {
		for i := 0; i < iters; i++ {
			if err := body(); err != nil {
				r.a.cuCtxSynchronize()
				return err
			}
		}
		return nil
	})
}

// pinned is a page-locked host buffer.
type pinned struct {
	p    unsafe.Pointer
	size uint64
}

func (r *Runner) allocPinned(size uint64) (*pinned, error) {
	var p unsafe.Pointer
	if err := r.a.cuErr(fmt.Sprintf("cuMemAllocHost %d MiB (pinned)", size>>20), r.a.cuMemAllocHost(&p, size)); err != nil {
		return nil, err
	}
	return &pinned{p: p, size: size}, nil
}

func (h *pinned) bytes() []byte { return unsafe.Slice((*byte)(h.p), h.size) }

// fill writes size bytes at dptr with chunk repeated, through a pinned staging buffer.
func (r *Runner) fill(dptr, size uint64, chunk []byte) error {
	h, err := r.allocPinned(uint64(len(chunk)))
	if err != nil {
		return err
	}
	defer r.a.cuMemFreeHost(h.p)
	copy(h.bytes(), chunk)
	step := uint64(len(chunk))
	for off := uint64(0); off < size; off += step {
		n := min(step, size-off)
		if err := r.a.cuErr("cuMemcpyHtoDAsync (fill)", r.a.cuMemcpyHtoDAsync(dptr+off, h.p, n, 0)); err != nil {
			return err
		}
	}
	return r.a.cuErr("cuCtxSynchronize (fill)", r.a.cuCtxSynchronize())
}

// FillRandom writes uniform values in [-1, 1) into b as little-endian FP32 or BF16.
func FillRandom(b []byte, bf16 bool, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	elem := elemBytes(bf16)
	for i := 0; i+elem <= len(b); i += elem {
		putElem(b[i:], bf16, math.Float32bits(float32(rng.Float64()*2-1)))
	}
}

// elemBytes is the size of one element: 2 bytes in BF16, 4 in FP32.
func elemBytes(bf16 bool) int {
	if bf16 {
		return 2
	}
	return 4
}

// putElem writes the FP32 bits as little-endian FP32, or as BF16 (the top half of FP32).
func putElem(b []byte, bf16 bool, bits uint32) {
	if bf16 {
		binary.LittleEndian.PutUint16(b, uint16(bits>>16))
	} else {
		binary.LittleEndian.PutUint32(b, bits)
	}
}

func (r *Runner) pcie(h2d bool, size uint64) (float64, error) {
	a := r.a
	h, err := r.allocPinned(size)
	if err != nil {
		return 0, err
	}
	defer a.cuMemFreeHost(h.p)
	clear(h.bytes()) // touch every page so the first copy does not pay for faults
	var dptr uint64
	if err := a.cuErr(fmt.Sprintf("cuMemAlloc %d MiB", size>>20), a.cuMemAlloc(&dptr, size)); err != nil {
		return 0, err
	}
	defer a.cuMemFree(dptr)
	return r.copyRate(float64(size), pcieIters, func() error {
		if h2d {
			return a.cuErr("cuMemcpyHtoDAsync", a.cuMemcpyHtoDAsync(dptr, h.p, size, 0))
		}
		return a.cuErr("cuMemcpyDtoHAsync", a.cuMemcpyDtoHAsync(h.p, dptr, size, 0))
	})
}

// copyRate times iters copies after one warm-up and returns the GB/s of bytes moved by each.
func (r *Runner) copyRate(bytes float64, iters int, copyOnce func() error) (float64, error) {
	if _, err := r.timed(1, copyOnce); err != nil {
		return 0, err
	}
	secs, err := r.timed(iters, copyOnce)
	if err != nil {
		return 0, err
	}
	return bytes * float64(iters) / secs / 1e9, nil
}

func (r *Runner) hbm(size uint64) (float64, error) {
	a := r.a
	var src, dst uint64
	if err := a.cuErr(fmt.Sprintf("cuMemAlloc %d MiB (HBM source)", size>>20), a.cuMemAlloc(&src, size)); err != nil {
		return 0, err
	}
	defer a.cuMemFree(src)
	if err := a.cuErr(fmt.Sprintf("cuMemAlloc %d MiB (HBM destination)", size>>20), a.cuMemAlloc(&dst, size)); err != nil {
		return 0, err
	}
	defer a.cuMemFree(dst)
	// Each byte copied is read once and written once.
	return r.copyRate(2*float64(size), hbmIters, func() error {
		return a.cuErr("cuMemcpyDtoDAsync", a.cuMemcpyDtoDAsync(dst, src, size, 0))
	})
}

// checker holds the row checksums of a GEMM's results on the device: v (n weights in the GEMM's
// input type) and slots × n FP32 sums, read back through a pinned buffer.
type checker struct {
	m     *gemmBufs
	v     uint64
	sums  uint64
	slots int
	host  *pinned
}

func (r *Runner) newChecker(m *gemmBufs, slots int) (*checker, error) {
	a, n := r.a, m.n
	bf16 := m.kind == gemmBF16
	elem := elemBytes(bf16)
	w := make([]byte, n*elem)
	for k := 0; k < n; k++ {
		putElem(w[k*elem:], bf16, math.Float32bits(checksumWeight(k)))
	}
	ck := &checker{m: m, slots: slots}
	sumBytes := uint64(slots) * uint64(n) * 4
	if err := a.cuErr("cuMemAlloc (checksum weights)", a.cuMemAlloc(&ck.v, uint64(len(w)))); err != nil {
		return nil, err
	}
	if err := a.cuErr("cuMemAlloc (checksums)", a.cuMemAlloc(&ck.sums, sumBytes)); err != nil {
		ck.free()
		return nil, err
	}
	h, err := r.allocPinned(max(sumBytes, uint64(len(w))))
	if err != nil {
		ck.free()
		return nil, err
	}
	ck.host = h
	copy(h.bytes(), w)
	if err := a.cuErr("cuMemcpyHtoDAsync (checksum weights)", a.cuMemcpyHtoDAsync(ck.v, h.p, uint64(len(w)), 0)); err != nil {
		ck.free()
		return nil, err
	}
	if err := a.cuErr("cuCtxSynchronize (checksum weights)", a.cuCtxSynchronize()); err != nil {
		ck.free()
		return nil, err
	}
	return ck, nil
}

func (ck *checker) free() {
	a := ck.m.r.a
	if ck.v != 0 {
		a.cuMemFree(ck.v)
	}
	if ck.sums != 0 {
		a.cuMemFree(ck.sums)
	}
	if ck.host != nil {
		a.cuMemFreeHost(ck.host.p)
	}
}

// sum enqueues the row checksum of the current C into a slot: sums[slot] = C·v, FP32 accumulation
// and output, default math (no TF32), so it is exact enough to see any changed element.
func (ck *checker) sum(slot int) error {
	m := ck.m
	a, n := m.r.a, int32(m.n)
	alpha, beta := float32(1), float32(0)
	dst := ck.sums + uint64(slot)*uint64(m.n)*4
	if m.kind == gemmBF16 {
		return blasErr("cublasGemmEx (checksum)", a.cublasGemmEx(m.d.blas, cublasOpN, cublasOpN, n, 1, n, unsafe.Pointer(&alpha),
			m.c, cudaR16BF, n, ck.v, cudaR16BF, n, unsafe.Pointer(&beta), dst, cudaR32F, n, cublasCompute32F, cublasGemmDefault))
	}
	if err := blasErr("cublasSetMathMode (checksum)", a.cublasSetMathMode(m.d.blas, cublasDefaultMath)); err != nil {
		return err
	}
	return blasErr("cublasSgemm (checksum)", a.cublasSgemm(m.d.blas, cublasOpN, cublasOpN, n, 1, n, &alpha, m.c, n, ck.v, n, &beta, dst, n))
}

// read copies the first k slots back (after the GEMMs before them finished).
func (ck *checker) read(k int) ([][]float32, error) {
	a, n := ck.m.r.a, ck.m.n
	size := uint64(k) * uint64(n) * 4
	if err := a.cuErr("cuMemcpyDtoHAsync (checksums)", a.cuMemcpyDtoHAsync(ck.host.p, ck.sums, size, 0)); err != nil {
		return nil, err
	}
	if err := a.cuErr("cuCtxSynchronize (checksums: a GEMM failed)", a.cuCtxSynchronize()); err != nil {
		return nil, err
	}
	b := ck.host.bytes()
	out := make([][]float32, k)
	for s := range out {
		out[s] = make([]float32, n)
		for i := range out[s] {
			out[s][i] = math.Float32frombits(binary.LittleEndian.Uint32(b[(s*n+i)*4:]))
		}
	}
	return out, nil
}

// tile copies the tile's columns of the current C back and recomputes them on the CPU.
func (r *Runner) tile(m *gemmBufs) (string, int, error) {
	bf16 := m.kind == gemmBF16
	colBytes := uint64(m.n) * uint64(elemBytes(bf16))
	cols := tileIndexes(m.n)
	h, err := r.allocPinned(colBytes * uint64(len(cols)))
	if err != nil {
		return "", 0, err
	}
	defer r.a.cuMemFreeHost(h.p)
	for t, j := range cols {
		dst := unsafe.Add(h.p, uint64(t)*colBytes)
		if err := r.a.cuErr("cuMemcpyDtoHAsync (tile)", r.a.cuMemcpyDtoHAsync(dst, m.c+uint64(j)*colBytes, colBytes, 0)); err != nil {
			return "", 0, err
		}
	}
	if err := r.a.cuErr("cuCtxSynchronize (tile)", r.a.cuCtxSynchronize()); err != nil {
		return "", 0, err
	}
	b := h.bytes()
	val := func(idx int) float64 { return hostValue(m.host, bf16, idx) }
	tile, bad := checkTileCPU(m.kind, m.n, val, val, func(t, i int) float64 {
		return deviceValue(b[uint64(t)*colBytes:], bf16, i)
	})
	return tile, bad, nil
}
