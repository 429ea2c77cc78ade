// Package cuda runs the health microbenchmarks (cuBLAS GEMM, pinned PCIe copies, HBM copies) through
// the CUDA driver API and cuBLAS, loaded at run time with purego: the binary needs no CUDA toolkit to
// build, and a host without CUDA gets a clear error instead of a loader failure.
package cuda

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The driver API and cuBLAS entry points gpuvet uses. CUresult and cublasStatus_t are int32.
type api struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGetByPCIBusId     func(dev *int32, busID string) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuMemAlloc                func(dptr *uint64, size uint64) int32
	cuMemFree                 func(dptr uint64) int32
	cuMemAllocHost            func(p *unsafe.Pointer, size uint64) int32
	cuMemFreeHost             func(p unsafe.Pointer) int32
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, size uint64, stream uintptr) int32
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, size uint64, stream uintptr) int32
	cuMemcpyDtoDAsync         func(dst, src uint64, size uint64, stream uintptr) int32
	cuEventCreate             func(ev *uintptr, flags uint32) int32
	cuEventRecord             func(ev uintptr, stream uintptr) int32
	cuEventSynchronize        func(ev uintptr) int32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) int32
	cuEventDestroy            func(ev uintptr) int32
	cuGetErrorName            func(res int32, name *unsafe.Pointer) int32

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
	cu, err := openLibcuda()
	if err != nil {
		return nil, err
	}
	var blas uintptr
	var tried []string
	a := &api{}
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
	const where = "from the CUDA libraries (driver or cuBLAS too old?)"
	if err := bind(cu, where, []symbol{
		{&a.cuInit, "cuInit"}, {&a.cuDeviceGetByPCIBusId, "cuDeviceGetByPCIBusId"}, {&a.cuDeviceGet, "cuDeviceGet"},
		{&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"}, {&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&a.cuCtxSetCurrent, "cuCtxSetCurrent"}, {&a.cuCtxSynchronize, "cuCtxSynchronize"}, {&a.cuMemAlloc, "cuMemAlloc_v2"},
		{&a.cuMemFree, "cuMemFree_v2"}, {&a.cuMemAllocHost, "cuMemAllocHost_v2"}, {&a.cuMemFreeHost, "cuMemFreeHost"},
		{&a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"}, {&a.cuEventCreate, "cuEventCreate"}, {&a.cuEventRecord, "cuEventRecord"},
		{&a.cuEventSynchronize, "cuEventSynchronize"}, {&a.cuEventElapsedTime, "cuEventElapsedTime"},
		{&a.cuEventDestroy, "cuEventDestroy_v2"}, {&a.cuGetErrorName, "cuGetErrorName"},
	}); err != nil {
		return nil, err
	}
	if err := bind(blas, where, []symbol{{&a.cublasCreate, "cublasCreate_v2"}, {&a.cublasDestroy, "cublasDestroy_v2"},
		{&a.cublasSetMathMode, "cublasSetMathMode"}, {&a.cublasSgemm, "cublasSgemm_v2"}, {&a.cublasGemmEx, "cublasGemmEx"}}); err != nil {
		return nil, err
	}
	return a, cuInit(a.cuInit, a.cuGetErrorName)
}

// openLibcuda opens the CUDA driver library (both API tables load it).
func openLibcuda() (uintptr, error) {
	cu, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, fmt.Errorf("CUDA driver library libcuda.so.1 not loadable: %v (install the NVIDIA driver, or run with --sim)", err)
	}
	return cu, nil
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
			return fmt.Errorf("symbol %s missing %s: %v", s.name, where, err)
		}
		purego.RegisterLibFunc(s.fn, lib, s.name)
	}
	return nil
}

// cuInit initialises the driver API.
func cuInit(init func(flags uint32) int32, getName func(int32, *unsafe.Pointer) int32) error {
	if r := init(0); r != 0 {
		return fmt.Errorf("cuInit: %s (is a GPU visible? check CUDA_VISIBLE_DEVICES and `nvidia-smi`)", cuErrName(getName, r))
	}
	return nil
}

// cuErrName names a CUresult through the driver's cuGetErrorName, e.g. "CUDA_ERROR_OUT_OF_MEMORY (2)".
func cuErrName(getName func(int32, *unsafe.Pointer) int32, r int32) string {
	var p unsafe.Pointer
	if getName(r, &p) != 0 || p == nil {
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
func (a *api) cuErr(what string, r int32) error { return cuFailed(a.cuGetErrorName, what, r) }

func cuFailed(getName func(int32, *unsafe.Pointer) int32, what string, r int32) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, cuErrName(getName, r))
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

// errs joins the errors of cleanup steps after the main error.
func errs(list ...error) error { return errors.Join(list...) }
