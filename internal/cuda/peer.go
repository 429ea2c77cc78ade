package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sysfs"
)

// Peer-to-peer copy sizes: 256 MiB per copy, 2 warm-up + 20 timed each way (about 13 ms at NVLink
// speed, 0.2 s over PCIe), large enough that launch cost is far under 1 %.
const (
	peerBytes  = 256 << 20
	peerWarmup = 2
	peerIters  = 20
)

// ErrNoPeerAccess is wrapped by PeerCopy when the driver says one GPU cannot map the other's memory.
var ErrNoPeerAccess = errors.New("peer access unavailable")

// cudaErrorPeerAccessAlreadyEnabled (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) is success for us.
const cudaErrorPeerAccessAlreadyEnabled = 704

// peerAPI is the driver API the GPU-to-GPU measurements use. It loads libcuda.so.1 on its own, so a
// host without cuBLAS still measures its links.
type peerAPI struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGetByPCIBusId     func(dev *int32, busID string) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceCanAccessPeer     func(can *int32, dev, peer int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxEnablePeerAccess     func(peer uintptr, flags uint32) int32
	cuMemAlloc                func(dptr *uint64, size uint64) int32
	cuMemFree                 func(dptr uint64) int32
	cuMemsetD32               func(dptr uint64, v uint32, n uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, size uint64) int32
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

func loadPeerAPI() (*peerAPI, error) {
	cu, err := openLibcuda()
	if err != nil {
		return nil, err
	}
	a := &peerAPI{}
	if err := bind(cu, "from libcuda.so.1 (driver too old?)", []symbol{
		{&a.cuInit, "cuInit"}, {&a.cuDeviceGetByPCIBusId, "cuDeviceGetByPCIBusId"}, {&a.cuDeviceGet, "cuDeviceGet"},
		{&a.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"}, {&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"}, {&a.cuCtxSetCurrent, "cuCtxSetCurrent"},
		{&a.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"}, {&a.cuMemAlloc, "cuMemAlloc_v2"}, {&a.cuMemFree, "cuMemFree_v2"},
		{&a.cuMemsetD32, "cuMemsetD32_v2"}, {&a.cuMemcpyDtoH, "cuMemcpyDtoH_v2"}, {&a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
		{&a.cuStreamCreate, "cuStreamCreate"}, {&a.cuStreamDestroy, "cuStreamDestroy_v2"}, {&a.cuStreamSynchronize, "cuStreamSynchronize"},
		{&a.cuStreamWaitEvent, "cuStreamWaitEvent"}, {&a.cuEventCreate, "cuEventCreate"}, {&a.cuEventRecord, "cuEventRecord"},
		{&a.cuEventSynchronize, "cuEventSynchronize"}, {&a.cuEventElapsedTime, "cuEventElapsedTime"},
		{&a.cuEventDestroy, "cuEventDestroy_v2"}, {&a.cuGetErrorName, "cuGetErrorName"},
	}); err != nil {
		return nil, err
	}
	return a, cuInit(a.cuInit, a.cuGetErrorName)
}

func (a *peerAPI) errName(r int32) string { return cuErrName(a.cuGetErrorName, r) }

func (a *peerAPI) err(what string, r int32) error { return cuFailed(a.cuGetErrorName, what, r) }

// Peer measures GPU-to-GPU copy bandwidth and NCCL all-reduce. It holds one primary context per GPU.
type Peer struct {
	a    *peerAPI
	mu   sync.Mutex
	ctxs map[int32]uintptr // CUDA ordinal -> retained primary context
	// NCCLLib is the libnccl to load ("" : search, see FindNCCL).
	NCCLLib string
}

// OpenPeer loads the CUDA driver API. The error names what is missing.
func OpenPeer() (*Peer, error) {
	a, err := loadPeerAPI()
	if err != nil {
		return nil, err
	}
	return &Peer{a: a, ctxs: map[int32]uintptr{}}, nil
}

// ordinal finds the CUDA device of a GPU by its bus id (CUDA's order may differ from NVML's).
func (p *Peer) ordinal(g results.GPUInfo) (int32, error) {
	var ord int32
	if g.PCIBusID != "" {
		return ord, p.a.err("finding the CUDA device of GPU "+g.PCIBusID, p.a.cuDeviceGetByPCIBusId(&ord, sysfs.BusID(g.PCIBusID)))
	}
	return ord, p.a.err(fmt.Sprintf("finding CUDA device %d", g.Index), p.a.cuDeviceGet(&ord, int32(g.Index)))
}

// context retains (once) and returns the primary context of a CUDA device.
func (p *Peer) context(ord int32) (uintptr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.ctxs[ord]; ok {
		return c, nil
	}
	var c uintptr
	if err := p.a.err("cuDevicePrimaryCtxRetain", p.a.cuDevicePrimaryCtxRetain(&c, ord)); err != nil {
		return 0, err
	}
	p.ctxs[ord] = c
	return c, nil
}

// Close releases the primary contexts.
func (p *Peer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var list []error
	for ord := range p.ctxs {
		list = append(list, p.a.err("cuDevicePrimaryCtxRelease", p.a.cuDevicePrimaryCtxRelease(ord)))
	}
	p.ctxs = map[int32]uintptr{}
	return errors.Join(list...)
}

// Describe says how the copies are measured.
func (p *Peer) Describe() string {
	return fmt.Sprintf("cuMemcpyDtoDAsync with peer access, %d MiB × %d after %d warm-up; bi: both directions at once, bytes of both counted", peerBytes>>20, peerIters, peerWarmup)
}

// end is one GPU of a copy: its context, a stream, a source and a destination buffer.
type end struct {
	ord      int32
	ctx      uintptr
	stream   uintptr
	src, dst uint64
}

// PeerCopy measures a → b with peer access (uni), then a → b and b → a at once (bi), in GB/s (10^9).
// When the GPUs cannot reach each other's memory the error wraps ErrNoPeerAccess.
func (p *Peer) PeerCopy(ctx context.Context, ga, gb results.GPUInfo) (uni, bi float64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	runtime.LockOSThread() // contexts are current per OS thread
	defer runtime.UnlockOSThread()
	a := p.a
	var ends [2]*end
	for i, g := range []results.GPUInfo{ga, gb} {
		ord, err := p.ordinal(g)
		if err != nil {
			return 0, 0, err
		}
		c, err := p.context(ord)
		if err != nil {
			return 0, 0, err
		}
		ends[i] = &end{ord: ord, ctx: c}
	}
	for i, e := range ends {
		o := ends[1-i]
		var can int32
		if err := a.err("cuDeviceCanAccessPeer", a.cuDeviceCanAccessPeer(&can, e.ord, o.ord)); err != nil {
			return 0, 0, err
		}
		if can == 0 {
			return 0, 0, fmt.Errorf("%w: the driver says GPU %d cannot map GPU %d's memory (cuDeviceCanAccessPeer = 0; in a VM, the hypervisor may block P2P)", ErrNoPeerAccess, []int{ga.Index, gb.Index}[i], []int{ga.Index, gb.Index}[1-i])
		}
		a.cuCtxSetCurrent(e.ctx)
		if r := a.cuCtxEnablePeerAccess(o.ctx, 0); r != 0 && r != cudaErrorPeerAccessAlreadyEnabled {
			return 0, 0, fmt.Errorf("%w: cuCtxEnablePeerAccess: %s", ErrNoPeerAccess, a.errName(r))
		}
	}
	defer p.freeEnds(ends[:])
	for _, e := range ends {
		if err := p.prepare(e); err != nil {
			return 0, 0, err
		}
	}
	if uni, err = p.timeCopies(ends[:1], ends[1:]); err != nil {
		return 0, 0, err
	}
	if bi, err = p.timeCopies(ends[:], []*end{ends[1], ends[0]}); err != nil {
		return uni, 0, err
	}
	return uni, bi, nil
}

// prepare makes a stream and two filled buffers on one GPU (filled: copies of untouched memory can
// take shortcuts on some drivers; the pattern is not zero).
func (p *Peer) prepare(e *end) error {
	a := p.a
	a.cuCtxSetCurrent(e.ctx)
	if err := a.err("cuStreamCreate", a.cuStreamCreate(&e.stream, 1)); err != nil { // 1: non-blocking
		return err
	}
	for _, buf := range []*uint64{&e.src, &e.dst} {
		if err := a.err(fmt.Sprintf("cuMemAlloc %d MiB (peer copy)", peerBytes>>20), a.cuMemAlloc(buf, peerBytes)); err != nil {
			return err
		}
		if err := a.err("cuMemsetD32", a.cuMemsetD32(*buf, 0x3fa5a5a5, peerBytes/4)); err != nil {
			return err
		}
	}
	return a.err("cuStreamSynchronize (fill)", a.cuStreamSynchronize(0))
}

func (p *Peer) freeEnds(ends []*end) {
	for _, e := range ends {
		if e == nil || e.ctx == 0 {
			continue
		}
		p.a.cuCtxSetCurrent(e.ctx)
		if e.stream != 0 {
			p.a.cuStreamSynchronize(e.stream)
			p.a.cuStreamDestroy(e.stream)
		}
		for _, b := range []uint64{e.src, e.dst} {
			if b != 0 {
				p.a.cuMemFree(b)
			}
		}
	}
}

// timeCopies copies from[i].src → to[i].dst on from[i]'s stream, all directions at once, and returns
// the GB/s of all bytes moved. The streams start together on an event of the first and the first
// waits for the others' ends, so one pair of events on the first GPU spans the whole transfer.
func (p *Peer) timeCopies(from, to []*end) (float64, error) {
	a := p.a
	run := func(iters int) (float64, error) {
		first := from[0]
		a.cuCtxSetCurrent(first.ctx)
		var start, stop uintptr
		if err := a.err("cuEventCreate", a.cuEventCreate(&start, 0)); err != nil {
			return 0, err
		}
		defer a.cuEventDestroy(start)
		if err := a.err("cuEventCreate", a.cuEventCreate(&stop, 0)); err != nil {
			return 0, err
		}
		defer a.cuEventDestroy(stop)
		if err := a.err("cuEventRecord", a.cuEventRecord(start, first.stream)); err != nil {
			return 0, err
		}
		var others []uintptr
		defer func() {
			for _, ev := range others {
				a.cuEventDestroy(ev)
			}
		}()
		for i := len(from) - 1; i >= 0; i-- { // the others first, so the first stream can wait on them
			e := from[i]
			a.cuCtxSetCurrent(e.ctx)
			if i > 0 {
				if err := a.err("cuStreamWaitEvent", a.cuStreamWaitEvent(e.stream, start, 0)); err != nil {
					return 0, err
				}
			}
			for k := 0; k < iters; k++ {
				if err := a.err("cuMemcpyDtoDAsync (peer)", a.cuMemcpyDtoDAsync(to[i].dst, e.src, peerBytes, e.stream)); err != nil {
					return 0, err
				}
			}
			if i > 0 {
				var done uintptr
				if err := a.err("cuEventCreate", a.cuEventCreate(&done, 0)); err != nil {
					return 0, err
				}
				others = append(others, done)
				if err := a.err("cuEventRecord", a.cuEventRecord(done, e.stream)); err != nil {
					return 0, err
				}
			}
		}
		a.cuCtxSetCurrent(first.ctx)
		for _, ev := range others {
			if err := a.err("cuStreamWaitEvent", a.cuStreamWaitEvent(first.stream, ev, 0)); err != nil {
				return 0, err
			}
		}
		if err := a.err("cuEventRecord", a.cuEventRecord(stop, first.stream)); err != nil {
			return 0, err
		}
		if err := a.err("cuEventSynchronize (a peer copy failed)", a.cuEventSynchronize(stop)); err != nil {
			return 0, err
		}
		var ms float32
		if err := a.err("cuEventElapsedTime", a.cuEventElapsedTime(&ms, start, stop)); err != nil {
			return 0, err
		}
		if ms <= 0 {
			return 0, fmt.Errorf("CUDA events measured %v ms for %d peer copies: no time elapsed", ms, iters)
		}
		return float64(len(from)) * peerBytes * float64(iters) / (float64(ms) / 1000) / 1e9, nil
	}
	if _, err := run(peerWarmup); err != nil {
		return 0, err
	}
	return run(peerIters)
}
