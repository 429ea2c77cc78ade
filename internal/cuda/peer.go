package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/gpuvet/gpuvet/internal/results"
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

// Peer measures GPU-to-GPU copy bandwidth and NCCL all-reduce. It holds one primary context per GPU.
type Peer struct {
	a    *driver
	mu   sync.Mutex
	ctxs map[int32]uintptr // CUDA ordinal -> retained primary context
	// NCCLLib is the libnccl to load ("" : search, see FindNCCL).
	NCCLLib string
}

// OpenPeer loads the CUDA driver API. The error names what is missing.
func OpenPeer() (*Peer, error) {
	d, err := loadDriver()
	if err == nil {
		err = d.init()
	}
	if err != nil {
		return nil, err
	}
	return &Peer{a: d, ctxs: map[int32]uintptr{}}, nil
}

// context retains (once) and returns the primary context of a CUDA device.
func (p *Peer) context(ord int32) (uintptr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.ctxs[ord]; ok {
		return c, nil
	}
	var c uintptr
	if err := p.a.cuErr("cuDevicePrimaryCtxRetain", p.a.cuDevicePrimaryCtxRetain(&c, ord)); err != nil {
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
		list = append(list, p.a.cuErr("cuDevicePrimaryCtxRelease", p.a.cuDevicePrimaryCtxRelease(ord)))
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
		ord, err := p.a.ordinal(g)
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
		if err := a.cuErr("cuDeviceCanAccessPeer", a.cuDeviceCanAccessPeer(&can, e.ord, o.ord)); err != nil {
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
	if err := a.cuErr("cuStreamCreate", a.cuStreamCreate(&e.stream, 1)); err != nil { // 1: non-blocking
		return err
	}
	for _, buf := range []*uint64{&e.src, &e.dst} {
		if err := a.cuErr(fmt.Sprintf("cuMemAlloc %d MiB (peer copy)", peerBytes>>20), a.cuMemAlloc(buf, peerBytes)); err != nil {
			return err
		}
		if err := a.cuErr("cuMemsetD32", a.cuMemsetD32(*buf, 0x3fa5a5a5, peerBytes/4)); err != nil {
			return err
		}
	}
	return a.cuErr("cuStreamSynchronize (fill)", a.cuStreamSynchronize(0))
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
		var others []uintptr
		defer func() {
			for _, ev := range others {
				a.cuEventDestroy(ev)
			}
		}()
		work := fmt.Sprintf("%d peer copies", iters)
		secs, err := a.span(first.stream, "a peer copy failed", work, func(start uintptr) error {
			for i := len(from) - 1; i >= 0; i-- { // the others first, so the first stream can wait on them
				e := from[i]
				a.cuCtxSetCurrent(e.ctx)
				if i > 0 {
					if err := a.cuErr("cuStreamWaitEvent", a.cuStreamWaitEvent(e.stream, start, 0)); err != nil {
						return err
					}
				}
				for k := 0; k < iters; k++ {
					if err := a.cuErr("cuMemcpyDtoDAsync (peer)", a.cuMemcpyDtoDAsync(to[i].dst, e.src, peerBytes, e.stream)); err != nil {
						return err
					}
				}
				if i > 0 {
					var done uintptr
					if err := a.cuErr("cuEventCreate", a.cuEventCreate(&done, 0)); err != nil {
						return err
					}
					others = append(others, done)
					if err := a.cuErr("cuEventRecord", a.cuEventRecord(done, e.stream)); err != nil {
						return err
					}
				}
			}
			a.cuCtxSetCurrent(first.ctx)
			for _, ev := range others {
				if err := a.cuErr("cuStreamWaitEvent", a.cuStreamWaitEvent(first.stream, ev, 0)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		return float64(len(from)) * peerBytes * float64(iters) / secs / 1e9, nil
	}
	if _, err := run(peerWarmup); err != nil {
		return 0, err
	}
	return run(peerIters)
}
