package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpuvet/gpuvet/internal/results"
)

// All-reduce iterations per message size (the sizes are the caller's: health.AllReduceSizes).
const (
	allReduceWarmup = 5
	allReduceIters  = 20
	ncclFloat32     = 7 // ncclDataType_t
	ncclSum         = 0 // ncclRedOp_t
)

// ErrNoNCCL is wrapped when no libnccl.so.2 can be found: the all-reduce is skipped, not failed.
var ErrNoNCCL = errors.New("libnccl not found")

// ncclSearch are the places a libnccl.so.2 usually is beside an inference engine: the system library
// path first (dlopen's own search), then the nvidia-nccl wheels of Python environments (PyTorch,
// vLLM, SGLang ship one).
var ncclSearch = []string{
	"/usr/local/lib/python3*/dist-packages/nvidia/*/lib/libnccl.so.2",
	"/usr/lib/python3*/dist-packages/nvidia/*/lib/libnccl.so.2",
	"/usr/local/lib/python3*/site-packages/nvidia/*/lib/libnccl.so.2",
	"/usr/lib/python3*/site-packages/nvidia/*/lib/libnccl.so.2",
	"/opt/conda/lib/python3*/site-packages/nvidia/*/lib/libnccl.so.2",
	"/opt/*/lib/python3*/site-packages/nvidia/*/lib/libnccl.so.2",
	"$HOME/.local/lib/python3*/site-packages/nvidia/*/lib/libnccl.so.2",
	"$VIRTUAL_ENV/lib/python3*/site-packages/nvidia/*/lib/libnccl.so.2",
}

// NCCLHint says where to point gpuvet when no libnccl is found.
const NCCLHint = "point --nccl-lib (health.nccl_lib) at a libnccl.so.2, e.g. the one in PyTorch's environment: python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))'/lib/libnccl.so.2, or add its directory to LD_LIBRARY_PATH"

// FindNCCL opens the libnccl named (an error if it does not load), else libnccl.so.2 from the
// library path, else the first one found under ncclSearch. It returns the handle and what it loaded.
func FindNCCL(named string) (uintptr, string, error) {
	if named != "" {
		h, err := purego.Dlopen(named, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return 0, "", fmt.Errorf("--nccl-lib %s: %w (want the path of a libnccl.so.2)", named, err)
		}
		return h, named, nil
	}
	if h, err := purego.Dlopen("libnccl.so.2", purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
		return h, "libnccl.so.2 (library path)", nil
	}
	for _, pat := range NCCLCandidates() {
		if h, err := purego.Dlopen(pat, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return h, pat, nil
		}
	}
	return 0, "", fmt.Errorf("%w: not on the library path nor in a Python environment's nvidia-nccl wheel; %s", ErrNoNCCL, NCCLHint)
}

// NCCLCandidates expands ncclSearch on this host, in order.
func NCCLCandidates() []string {
	var out []string
	for _, pat := range ncclSearch {
		pat = os.ExpandEnv(pat)
		if !filepath.IsAbs(pat) {
			continue // $HOME or $VIRTUAL_ENV unset
		}
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	return out
}

type ncclAPI struct {
	getVersion  func(v *int32) int32
	commInitAll func(comms *uintptr, n int32, devs *int32) int32
	commDestroy func(comm uintptr) int32
	allReduce   func(send, recv uint64, count uint64, dtype, op int32, comm, stream uintptr) int32
	groupStart  func() int32
	groupEnd    func() int32
	errorString func(r int32) unsafe.Pointer
}

func bindNCCL(h uintptr) (*ncclAPI, error) {
	n := &ncclAPI{}
	return n, bind(h, "from libnccl", []symbol{{&n.getVersion, "ncclGetVersion"}, {&n.commInitAll, "ncclCommInitAll"},
		{&n.commDestroy, "ncclCommDestroy"}, {&n.allReduce, "ncclAllReduce"}, {&n.groupStart, "ncclGroupStart"},
		{&n.groupEnd, "ncclGroupEnd"}, {&n.errorString, "ncclGetErrorString"}})
}

func (n *ncclAPI) err(what string, r int32) error {
	if r == 0 {
		return nil
	}
	msg := "unknown"
	if p := n.errorString(r); p != nil {
		msg = goString(p)
	}
	return fmt.Errorf("%s: ncclResult %d (%s)", what, r, msg)
}

// NCCLVersion turns ncclGetVersion's code into "2.27.3" (major×10000 + minor×100 + patch from 2.9,
// major×1000 + minor×100 + patch before).
func NCCLVersion(code int) string {
	if code >= 20900 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}

// BusBW is nccl-tests' bus bandwidth of an all-reduce over n ranks: algbw × 2(n−1)/n, the traffic
// each link carries, comparable to the link's own figure whatever n is.
func BusBW(algbw float64, n int) float64 {
	if n < 2 {
		return 0
	}
	return algbw * 2 * float64(n-1) / float64(n)
}

// AllReduceRun is what AllReduce measured.
type AllReduceRun struct {
	Lib, Version string
	Sizes        []results.AllReduceSize
}

// AllReduceParams describes the measurement for the record.
func AllReduceParams() string {
	return fmt.Sprintf("ncclAllReduce float32 sum, out of place, one communicator per GPU (ncclCommInitAll) driven from one thread with group calls; %d warm-up + %d timed per size; result checked", allReduceWarmup, allReduceIters)
}

// AllReduce runs NCCL's all-reduce over gpus at each size (bytes of float32). Without a libnccl it is skipped and
// says where to point gpuvet; what was measured before an error is kept.
func (p *Peer) AllReduce(ctx context.Context, gpus []results.GPUInfo, sizes []int64) (*results.AllReduce, error) {
	run, err := p.allReduce(ctx, gpus, sizes)
	ar := &results.AllReduce{Status: results.StatusOK, Lib: run.Lib, NCCL: run.Version, GPUs: len(gpus), Dtype: "float32",
		Params: AllReduceParams(), Sizes: run.Sizes}
	if errors.Is(err, ErrNoNCCL) {
		ar.Status, ar.Note = results.StatusSkipped, "skipped: "+err.Error()
		return ar, nil
	}
	return ar, err
}

// allReduce runs NCCL's all-reduce over gpus at each size and returns nccl-tests' figures. The error
// wraps ErrNoNCCL when no libnccl is found.
func (p *Peer) allReduce(ctx context.Context, gpus []results.GPUInfo, sizes []int64) (AllReduceRun, error) {
	var out AllReduceRun
	if len(gpus) < 2 {
		return out, fmt.Errorf("all-reduce needs 2 or more GPUs, this host has %d", len(gpus))
	}
	h, lib, err := FindNCCL(p.NCCLLib)
	if err != nil {
		return out, err
	}
	out.Lib = lib
	nc, err := bindNCCL(h)
	if err != nil {
		return out, err
	}
	var code int32
	if err := nc.err("ncclGetVersion", nc.getVersion(&code)); err != nil {
		return out, err
	}
	out.Version = NCCLVersion(int(code))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := p.a
	n := len(gpus)
	devs := make([]int32, n)
	ends := make([]*end, n)
	for i, g := range gpus {
		if devs[i], err = p.a.ordinal(g); err != nil {
			return out, err
		}
		c, err := p.context(devs[i])
		if err != nil {
			return out, err
		}
		ends[i] = &end{ord: devs[i], ctx: c}
	}
	comms := make([]uintptr, n)
	if err := nc.err("ncclCommInitAll", nc.commInitAll(&comms[0], int32(n), &devs[0])); err != nil {
		return out, err
	}
	defer func() {
		for _, c := range comms {
			nc.commDestroy(c)
		}
	}()
	maxBytes := slicesMax(sizes)
	defer p.freeEnds(ends)
	for _, e := range ends {
		a.cuCtxSetCurrent(e.ctx)
		if err := a.cuErr("cuStreamCreate", a.cuStreamCreate(&e.stream, 1)); err != nil {
			return out, err
		}
		for _, b := range []*uint64{&e.src, &e.dst} {
			if err := a.cuErr(fmt.Sprintf("cuMemAlloc %d MiB (all-reduce)", maxBytes>>20), a.cuMemAlloc(b, uint64(maxBytes))); err != nil {
				return out, err
			}
		}
		// Every rank sends 1.0: the sum is n everywhere, checked below.
		if err := a.cuErr("cuMemsetD32", a.cuMemsetD32(e.src, math.Float32bits(1), uint64(maxBytes/4))); err != nil {
			return out, err
		}
		if err := a.cuErr("cuStreamSynchronize", a.cuStreamSynchronize(0)); err != nil {
			return out, err
		}
	}
	once := func(count uint64) error {
		if err := nc.err("ncclGroupStart", nc.groupStart()); err != nil {
			return err
		}
		for i, e := range ends {
			a.cuCtxSetCurrent(e.ctx)
			if r := nc.allReduce(e.src, e.dst, count, ncclFloat32, ncclSum, comms[i], e.stream); r != 0 {
				nc.groupEnd()
				return nc.err("ncclAllReduce", r)
			}
		}
		return nc.err("ncclGroupEnd", nc.groupEnd())
	}
	syncAll := func() error {
		for _, e := range ends {
			a.cuCtxSetCurrent(e.ctx)
			if err := a.cuErr("cuStreamSynchronize (all-reduce)", a.cuStreamSynchronize(e.stream)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, size := range sizes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		count := uint64(size / 4)
		for k := 0; k < allReduceWarmup; k++ {
			if err := once(count); err != nil {
				return out, err
			}
		}
		if err := syncAll(); err != nil {
			return out, err
		}
		if err := p.checkSum(ends, count, float32(n)); err != nil {
			return out, err
		}
		t0 := time.Now()
		for k := 0; k < allReduceIters; k++ {
			if err := once(count); err != nil {
				return out, err
			}
		}
		if err := syncAll(); err != nil {
			return out, err
		}
		secs := time.Since(t0).Seconds() / allReduceIters
		alg := float64(size) / secs / 1e9
		out.Sizes = append(out.Sizes, results.AllReduceSize{Bytes: size, TimeUs: secs * 1e6, AlgBWGBps: alg, BusBWGBps: BusBW(alg, n)})
	}
	return out, nil
}

// checkSum reads the first and last element of every rank's result: each must be want.
func (p *Peer) checkSum(ends []*end, count uint64, want float32) error {
	for i, e := range ends {
		p.a.cuCtxSetCurrent(e.ctx)
		for _, at := range []uint64{0, count - 1} {
			var v float32
			if err := p.a.cuErr("cuMemcpyDtoH (all-reduce check)", p.a.cuMemcpyDtoH(unsafe.Pointer(&v), e.dst+at*4, 4)); err != nil {
				return err
			}
			if v != want {
				return fmt.Errorf("all-reduce gave %v at element %d of rank %d, want %v: NCCL returned a wrong sum", v, at, i, want)
			}
		}
	}
	return nil
}

func slicesMax(s []int64) int64 {
	m := int64(0)
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
