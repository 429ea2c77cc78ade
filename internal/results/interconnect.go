package results

import (
	"cmp"
	"fmt"
)

// Interconnect is how the GPUs of a host reach each other: each GPU's NVLinks, the path of every GPU
// pair, the peer-to-peer copy bandwidth measured over it, and an all-reduce over all GPUs.
type Interconnect struct {
	Source string `json:"source"` // "nvml", "nvidia-smi" (captured text), "sim"
	// Links are each GPU's NVLinks (none on a GPU without NVLink).
	Links []GPULinks `json:"links,omitempty"`
	// Pairs are the GPU pairs, in (a, b) order with a < b; on big nodes only the measured neighbours
	// carry bandwidth figures.
	Pairs     []GPUPair  `json:"pairs,omitempty"`
	AllReduce *AllReduce `json:"all_reduce,omitempty"`
	Notes     []string   `json:"notes,omitempty"`
	Error     string     `json:"error,omitempty"`
	// DatasheetModel and DatasheetNVLinks are the catalog's entry for the GPUs and its NVLinks (0: none
	// or unknown), so the judge tells a pair on PCIe that should be on NVLink without the catalog.
	DatasheetModel   string `json:"datasheet_model,omitempty"`
	DatasheetNVLinks int    `json:"datasheet_nvlinks,omitempty"`
}

// GPULinks is one GPU's NVLinks.
type GPULinks struct {
	GPU   int      `json:"gpu"`
	Links []NVLink `json:"links"`
}

// NVLink is one link of a GPU: its state, speed, what it reaches, and its error counters. Counters
// are read at inventory and again at the end of the health phase; a counter that grew is a failure.
type NVLink struct {
	Link    int     `json:"link"`
	Up      bool    `json:"up"`
	Version int     `json:"version,omitempty"` // NVLink generation (4: Hopper)
	GBps    float64 `json:"gbps,omitempty"`    // one direction, GB/s (10^9)
	// Remote is the PCI bus id at the far end (a GPU, or an NVSwitch), RemoteType "gpu" or "switch".
	Remote     string `json:"remote,omitempty"`
	RemoteType string `json:"remote_type,omitempty"`
	// Errors at inventory; ErrorsAfter at the end of the phase (nil: not read again).
	Errors      *LinkErrors `json:"errors,omitempty"`
	ErrorsAfter *LinkErrors `json:"errors_after,omitempty"`
}

// LinkErrors are an NVLink's data-link error counters since the driver loaded, as `nvidia-smi nvlink
// -e` prints them.
type LinkErrors struct {
	CRC      uint64 `json:"crc"`
	Replay   uint64 `json:"replay"`
	Recovery uint64 `json:"recovery"`
}

// GPUPair is the path between two GPUs and, when measured, the copy bandwidth over it.
type GPUPair struct {
	A int `json:"a"`
	B int `json:"b"`
	// Path as `nvidia-smi topo -m` names it: "NV18" (18 bonded NVLinks), "NVSWITCH", "PIX", "PXB",
	// "PHB", "NODE", "SYS" (across CPU sockets).
	Path     string `json:"path"`
	NVLinks  int    `json:"nvlinks,omitempty"`  // links joining the pair (direct or through NVSwitch)
	NVSwitch bool   `json:"nvswitch,omitempty"` // the links go through NVSwitches
	// PCIePath is the pair's PCIe common ancestor even when NVLink joins them: GPUs under one switch
	// share its link to the host, so their PCIe copies are not measured at once. "": not known.
	PCIePath string `json:"pcie_path,omitempty"`
	// P2P is "ok" when peer access works both ways, else why not (e.g. "not supported by the chipset").
	P2P string `json:"p2p,omitempty"`
	// PeakGBps is the link's theoretical one-direction figure: NVLink count × link speed, else PCIe.
	PeakGBps float64     `json:"peak_gbps,omitempty"`
	Uni      *PairFigure `json:"uni,omitempty"` // a → b, one copy at a time
	Bi       *PairFigure `json:"bi,omitempty"`  // a → b and b → a at once; ratio against 2 × peak
	Params   string      `json:"params,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// PairFigure is one measured copy bandwidth with its ratio to the link's peak.
type PairFigure struct {
	GBps  float64  `json:"gbps"`
	Ratio *float64 `json:"ratio,omitempty"`
}

// AllReduce is NCCL's all-reduce over all GPUs of the host, with nccl-tests' figures per message size.
type AllReduce struct {
	Status Status `json:"status"`          // skipped when libnccl is not found (Note says where to point it)
	Lib    string `json:"lib,omitempty"`   // the libnccl loaded
	NCCL   string `json:"nccl,omitempty"`  // its version, e.g. "2.27.3"
	GPUs   int    `json:"gpus,omitempty"`  // ranks
	Dtype  string `json:"dtype,omitempty"` // "float32"
	// PeakGBps is the per-GPU link figure busbw is measured against (the slowest GPU's NVLink total).
	PeakGBps float64         `json:"peak_gbps,omitempty"`
	Sizes    []AllReduceSize `json:"sizes,omitempty"`
	Params   string          `json:"params,omitempty"`
	Note     string          `json:"note,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// AllReduceSize is one message size: algbw = bytes / time, busbw = algbw × 2(n−1)/n (nccl-tests).
type AllReduceSize struct {
	Bytes      int64    `json:"bytes"`
	TimeUs     float64  `json:"time_us"`
	AlgBWGBps  float64  `json:"algbw_gbps"`
	BusBWGBps  float64  `json:"busbw_gbps"`
	BusBWRatio *float64 `json:"busbw_ratio,omitempty"` // busbw / PeakGBps
}

// MaxMatrixGPUs bounds Matrix, the square of a host's few dozen GPUs at most (a wrong file's count
// must not take the memory).
const MaxMatrixGPUs = 256

// Matrix is the GPUs' path matrix as `nvidia-smi topo -m` prints it, with a header row: "X" on the
// diagonal, the pair's path elsewhere ("?" when unknown). Empty without pairs, or past MaxMatrixGPUs.
func (ic *Interconnect) Matrix(gpus int) [][]string {
	if ic == nil || len(ic.Pairs) == 0 || gpus > MaxMatrixGPUs {
		return nil
	}
	path := map[[2]int]string{}
	for _, p := range ic.Pairs {
		v := cmp.Or(p.Path, "?")
		path[[2]int{p.A, p.B}], path[[2]int{p.B, p.A}] = v, v
	}
	out := [][]string{{""}}
	for i := range gpus {
		out[0] = append(out[0], fmt.Sprintf("GPU%d", i))
		path[[2]int{i, i}] = "X"
	}
	for i := range gpus {
		row := []string{fmt.Sprintf("GPU%d", i)}
		for j := range gpus {
			row = append(row, cmp.Or(path[[2]int{i, j}], "?"))
		}
		out = append(out, row)
	}
	return out
}

// Up is how many of the GPU's links are up.
func (g GPULinks) Up() int {
	n := 0
	for _, l := range g.Links {
		if l.Up {
			n++
		}
	}
	return n
}

// ErrorTotals sums the GPU's link counters at the start and at the end (nil: not read).
func (g GPULinks) ErrorTotals() (start, end *LinkErrors) {
	add := func(dst **LinkErrors, e *LinkErrors) {
		if e == nil {
			return
		}
		if *dst == nil {
			*dst = &LinkErrors{}
		}
		(*dst).CRC += e.CRC
		(*dst).Replay += e.Replay
		(*dst).Recovery += e.Recovery
	}
	for _, l := range g.Links {
		add(&start, l.Errors)
		add(&end, l.ErrorsAfter)
	}
	return start, end
}

// SizeText writes a message size as "1 MiB", "1 GiB", or bytes when it is not a whole MiB.
func SizeText(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%d B", b)
}
