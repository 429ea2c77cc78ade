// Package cuda runs the health microbenchmarks (cuBLAS GEMM, pinned PCIe copies, HBM copies) through
// the CUDA driver API and cuBLAS, loaded at run time with purego: the binary needs no CUDA toolkit to
// build, and a host without CUDA gets a clear error instead of a loader failure.
package cuda

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sysfs"
)

// driver is the CUDA driver API gpuvet uses (the benchmarks and the GPU-to-GPU measurements
// alike). CUresult and cublasStatus_t are int32.
type driver struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGetByPCIBusId     func(dev *int32, busID string) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceCanAccessPeer     func(can *int32, dev, peer int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuCtxEnablePeerAccess     func(peer uintptr, flags uint32) int32
	cuMemAlloc                func(dptr *uint64, size uint64) int32
	cuMemFree                 func(dptr uint64) int32
	cuMemAllocHost            func(p *unsafe.Pointer, size uint64) int32
	cuMemFreeHost             func(p unsafe.Pointer) int32
	cuMemsetD32               func(dptr uint64, v uint32, n uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, size uint64) int32
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, size uint64, stream uintptr) int32
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, size uint64, stream uintptr) int32
	cuMemcpyDtoDAsync         func(dst, src uint64, size uint64, stream uintptr) int32
	cuStreamCreate            func(s *uintptr, flags uint32) int32
	cuStreamDestroy           func(s uintptr) int32
	cuStreamSynchronize       func(s uintptr) int32
	cuStreamWaitEvent         func(s, ev uintptr, flags uint32) int32
	cuEventCreate             func(ev *uintptr, flags uint32) int32
	cuEventRecord             func(ev uintptr, stream uintptr) int32
	cuEventSynchronize        func(ev uintptr) int32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) int32
	cuEventDestroy            func(ev uintptr) int32
	cuGetErrorName            func(res int32, name *unsafe.Pointer) int32
}

// api is the driver API and the cuBLAS entry points the benchmarks use.
type api struct {
	*driver
	cublasCreate      func(h *uintptr) int32
	cublasDestroy     func(h uintptr) int32
	cublasSetMathMode func(h uintptr, mode int32) int32
	cublasSgemm       func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) int32
	cublasGemmEx      func(h uintptr, ta, tb int32, m, n, k int32, alpha unsafe.Pointer, a uint64, atype int32, lda int32, b uint64, btype int32, ldb int32, beta unsafe.Pointer, c uint64, ctype int32, ldc int32, compute int32, algo int32) int32

	cublasLib string
}

// cuBLAS and CUDA enum values (cublas_api.h, library_types.h).
const (
	cublasOpN               = 0
	cublasDefaultMath       = 0
	cublasTF32TensorMath    = 3
	cudaR16BF               = 14
	cudaR32F                = 0
	cublasCompute32F        = 68
	cublasGemmDefaultTensor = 99
	cublasGemmDefault       = -1
)

// cublasNames are tried in order: CUDA 13, 12, 11, then the unversioned development link.
var cublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}

// load opens libcuda.so.1 and a libcublas and binds every symbol; a missing library or symbol is an
// error that names it (never a crash at the first call).
func load() (*api, error) {
	d, err := loadDriver()
	if err != nil {
		return nil, err
	}
	a := &api{driver: d}
	var blas uintptr
	var tried []string
	for _, name := range cublasNames {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			blas, a.cublasLib = h, name
			break
		}
		tried = append(tried, name)
	}
	if blas == 0 {
		return nil, fmt.Errorf("cuBLAS not loadable (tried %s): install the CUDA toolkit's libcublas or add its directory to LD_LIBRARY_PATH", strings.Join(tried, ", "))
	}
	if err := bind(blas, "from "+a.cublasLib+" (cuBLAS too old?)", []symbol{
		{&a.cublasCreate, "cublasCreate_v2"}, {&a.cublasDestroy, "cublasDestroy_v2"},
		{&a.cublasSetMathMode, "cublasSetMathMode"}, {&a.cublasSgemm, "cublasSgemm_v2"},
		{&a.cublasGemmEx, "cublasGemmEx"},
	}); err != nil {
		return nil, err
	}
	return a, d.init()
}

// loadDriver opens libcuda.so.1 and binds the driver API (the GPU-to-GPU measurements need no
// cuBLAS: a host without it still measures its links).
func loadDriver() (*driver, error) {
	cu, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("CUDA driver library libcuda.so.1 not loadable: %w (install the NVIDIA driver, or run with --sim)", err)
	}
	d := &driver{}
	return d, bind(cu, "from libcuda.so.1 (driver too old?)", []symbol{
		{&d.cuInit, "cuInit"}, {&d.cuDeviceGetByPCIBusId, "cuDeviceGetByPCIBusId"},
		{&d.cuDeviceGet, "cuDeviceGet"}, {&d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"},
		{&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&d.cuCtxSetCurrent, "cuCtxSetCurrent"}, {&d.cuCtxSynchronize, "cuCtxSynchronize"},
		{&d.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"}, {&d.cuMemAlloc, "cuMemAlloc_v2"},
		{&d.cuMemFree, "cuMemFree_v2"}, {&d.cuMemAllocHost, "cuMemAllocHost_v2"},
		{&d.cuMemFreeHost, "cuMemFreeHost"}, {&d.cuMemsetD32, "cuMemsetD32_v2"},
		{&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"}, {&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
		{&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"}, {&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
		{&d.cuStreamCreate, "cuStreamCreate"}, {&d.cuStreamDestroy, "cuStreamDestroy_v2"},
		{&d.cuStreamSynchronize, "cuStreamSynchronize"}, {&d.cuStreamWaitEvent, "cuStreamWaitEvent"},
		{&d.cuEventCreate, "cuEventCreate"}, {&d.cuEventRecord, "cuEventRecord"},
		{&d.cuEventSynchronize, "cuEventSynchronize"}, {&d.cuEventElapsedTime, "cuEventElapsedTime"},
		{&d.cuEventDestroy, "cuEventDestroy_v2"}, {&d.cuGetErrorName, "cuGetErrorName"},
	})
}

// symbol is a library function and the Go function variable it is bound to.
type symbol struct {
	fn   any
	name string
}

// bind binds every symbol of lib, checking first that it exists: a missing one is an error naming
// it and where it was looked for, not a crash at the first call.
func bind(lib uintptr, where string, syms []symbol) error {
	for _, s := range syms {
		if _, err := purego.Dlsym(lib, s.name); err != nil {
			return fmt.Errorf("symbol %s missing %s: %w", s.name, where, err)
		}
		purego.RegisterLibFunc(s.fn, lib, s.name)
	}
	return nil
}

// ordinal finds the CUDA device of a GPU by its bus id (CUDA's device order may differ from NVML's:
// the bus id ties the two together), else by its index.
func (d *driver) ordinal(g results.GPUInfo) (int32, error) {
	var ord int32
	if g.PCIBusID != "" {
		return ord, d.cuErr("finding the CUDA device of GPU "+g.PCIBusID, d.cuDeviceGetByPCIBusId(&ord, sysfs.BusID(g.PCIBusID)))
	}
	return ord, d.cuErr(fmt.Sprintf("finding CUDA device %d", g.Index), d.cuDeviceGet(&ord, int32(g.Index)))
}

// init initialises the driver API.
func (d *driver) init() error {
	if r := d.cuInit(0); r != 0 {
		return fmt.Errorf("cuInit: %s (is a GPU visible? check CUDA_VISIBLE_DEVICES and `nvidia-smi`)", d.errName(r))
	}
	return nil
}

// errName names a CUresult through the driver's cuGetErrorName, e.g. "CUDA_ERROR_OUT_OF_MEMORY (2)".
func (d *driver) errName(r int32) string {
	var p unsafe.Pointer
	if d.cuGetErrorName(r, &p) != 0 || p == nil {
		return fmt.Sprintf("CUresult %d", r)
	}
	return fmt.Sprintf("%s (%d)", goString(p), r)
}

func goString(p unsafe.Pointer) string {
	var b []byte
	for i := 0; i < 256; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// cuErr wraps a failed driver call; nil for success.
func (d *driver) cuErr(what string, r int32) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, d.errName(r))
}

// span records an event on stream, runs body (which enqueues work and may wait on that start
// event), records a second event on stream, waits for it and returns the seconds between the two.
// failed says what a failed wait means; work names the work for a span of no time.
func (d *driver) span(stream uintptr, failed, work string, body func(start uintptr) error) (float64, error) {
	var start, end uintptr
	if err := d.cuErr("cuEventCreate", d.cuEventCreate(&start, 0)); err != nil {
		return 0, err
	}
	defer d.cuEventDestroy(start)
	if err := d.cuErr("cuEventCreate", d.cuEventCreate(&end, 0)); err != nil {
		return 0, err
	}
	defer d.cuEventDestroy(end)
	if err := d.cuErr("cuEventRecord", d.cuEventRecord(start, stream)); err != nil {
		return 0, err
	}
	if err := body(start); err != nil {
		return 0, err
	}
	if err := d.cuErr("cuEventRecord", d.cuEventRecord(end, stream)); err != nil {
		return 0, err
	}
	if err := d.cuErr("cuEventSynchronize ("+failed+")", d.cuEventSynchronize(end)); err != nil {
		return 0, err
	}
	var ms float32
	if err := d.cuErr("cuEventElapsedTime", d.cuEventElapsedTime(&ms, start, end)); err != nil {
		return 0, err
	}
	if ms <= 0 {
		return 0, fmt.Errorf("CUDA events measured %v ms for %s: no time elapsed", ms, work)
	}
	return float64(ms) / 1000, nil
}

// blasErr wraps a failed cuBLAS call (cublasStatus_t names from cublas_api.h).
func blasErr(what string, r int32) error {
	if r == 0 {
		return nil
	}
	names := map[int32]string{1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
		11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED", 16: "LICENSE_ERROR"}
	n, ok := names[r]
	if !ok {
		n = "UNKNOWN"
	}
	return fmt.Errorf("%s: CUBLAS_STATUS_%s (%d)", what, n, r)
}
