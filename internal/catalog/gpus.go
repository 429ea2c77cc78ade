// Package catalog holds the datasheet figures of GPUs and the architecture figures of models: the one
// place both the health phase (ratio of a measurement to its peak) and the simulator (roofline) read.
package catalog

import "fmt"

// GPU is a GPU model's datasheet figures. Tensor figures are DENSE (NVIDIA's datasheets print the
// 2:4-sparse figure first; it is twice these).
type GPU struct {
	// Key is the short name users type (--gpu H100); Names are exact nvidia-smi product names.
	Key           string   `yaml:"key"`
	Names         []string `yaml:"names"`
	Architecture  string   `yaml:"architecture"`
	MemoryGiB     float64  `yaml:"memory_gib"`       // usable device memory as the driver reports it
	FP32TFLOPS    float64  `yaml:"fp32_tflops"`      // non-tensor FP32 (the SGEMM peak)
	TF32TFLOPS    float64  `yaml:"tf32_tflops"`      // tensor TF32, dense
	BF16TFLOPS    float64  `yaml:"bf16_tflops"`      // tensor BF16, dense
	HBMGBps       float64  `yaml:"hbm_gbps"`         // device memory bandwidth, GB/s (10^9)
	PCIeGen       int      `yaml:"pcie_gen"`         // host link generation (0: not PCIe-attached, e.g. C2C)
	PCIeWidth     int      `yaml:"pcie_width"`       // lanes
	TDPW          float64  `yaml:"tdp_w"`            // board power limit at default
	NVLinkGBps    float64  `yaml:"nvlink_gbps"`      // total NVLink bandwidth per GPU, one direction (0: none)
	ComputeCap    string   `yaml:"compute_cap"`      // "9.0"
	MaxSMClockMHz int      `yaml:"max_sm_clock_mhz"` // boost clock nvidia-smi reports as max
	IdleW         float64  `yaml:"idle_w"`           // typical board power at idle
	// PeerLink is the GPU-to-GPU link tensor parallelism's all-reduces use. Zero: PCIe through the
	// host (see TPLink).
	PeerLink GPULink `yaml:"peer_link"`
	SMs      int     `yaml:"sms"` // streaming multiprocessors (0: unknown; the simulator then ignores wave quantisation)

	// Simulator figures that override its per-architecture ones (internal/sim efficiency.go);
	// required for an architecture the simulator does not know. Zero: the architecture's.
	MFU            float64 `yaml:"mfu"`              // achieved fraction of BF16TFLOPS in a large GEMM
	MBU            float64 `yaml:"mbu"`              // achieved fraction of HBMGBps in a streaming read
	StepOverheadMs float64 `yaml:"step_overhead_ms"` // fixed CPU/launch cost of one engine step
	SeqOverheadUs  float64 `yaml:"seq_overhead_us"`  // per-sequence scheduling/sampling cost per step
}

// GPULink is a GPU-to-GPU link as tensor parallelism sees it.
type GPULink struct {
	Kind string  `yaml:"kind"` // "NVLink4 (NVSwitch)", "PCIe Gen5"
	GBps float64 `yaml:"gbps"` // per GPU, one direction, GB/s (10^9): NVIDIA's "total NVLink bandwidth" ÷ 2
	// LatencyUs is the time of one small all-reduce over the link (the floor whatever the message):
	// kernel launch, flag exchange and hops.
	LatencyUs float64 `yaml:"latency_us"`
}

// pcieAllReduceLatencyUs is a small all-reduce between PCIe GPUs: NCCL through host bridges, no
// P2P custom all-reduce (vLLM disables it without NVLink for tp > 2). nccl-tests report 20–40 µs
// small-message all_reduce latency over PCIe; the middle of that.
const pcieAllReduceLatencyUs = 30

// TPLink is the link tensor parallelism uses on this GPU: PeerLink when set, else PCIe at the
// GPU's generation and width through the host (about 80 % of the lane rate for P2P through a
// switch/root complex).
func (g GPU) TPLink() GPULink {
	if g.PeerLink.GBps > 0 {
		return g.PeerLink
	}
	bw := g.PCIeGBps() * 0.8
	if bw == 0 {
		bw = pcieLane[4] * 16 * 0.8 // not PCIe-attached and no peer link given: assume Gen4 x16
	}
	return GPULink{Kind: fmt.Sprintf("PCIe Gen%d x%d", g.PCIeGen, g.PCIeWidth), GBps: bw, LatencyUs: pcieAllReduceLatencyUs}
}

// PCIeGBps is the usable one-direction bandwidth of the host link: per-lane rate × width after
// encoding (128b/130b from Gen3). Pinned transfers reach about 85–90 % of it.
func (g GPU) PCIeGBps() float64 {
	return PCIeLinkGBps(g.PCIeGen, g.PCIeWidth)
}

// PCIeLinkGBps is the usable one-direction bandwidth of a PCIe link of generation gen and width
// lanes (0 for a generation it does not know).
func PCIeLinkGBps(gen, width int) float64 {
	return pcieLane[gen] * float64(width)
}

// pcieLane is GB/s per lane, one direction, per generation.
var pcieLane = map[int]float64{1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

// builtinGPUs is the built-in GPU table (read through Builtin; never changed at run time). Peer links: NVIDIA's per-GPU NVLink figure halved (one direction); the
// latency of one small all-reduce is vLLM's custom all-reduce on H100 SXM (9 µs up to 32 KiB,
// sgl-project/sglang#2904), used for every NVLink generation (A100 and Blackwell: not measured).
// Sources: NVIDIA datasheets (A100, L40S, L4, H100, H200, HGX B200,
// GB200 NVL72 ÷ 72, RTX PRO 6000 Blackwell Server Edition); max SM clocks as nvidia-smi reports them
// (H200: fixtures/h200), idle power typical of an idle board with persistence on.
var builtinGPUs = []GPU{
	{Key: "A100", Names: []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"},
		Architecture: "Ampere", MemoryGiB: 80, FP32TFLOPS: 19.5, TF32TFLOPS: 156, BF16TFLOPS: 312, HBMGBps: 2039,
		PCIeGen: 4, PCIeWidth: 16, TDPW: 400, NVLinkGBps: 300, ComputeCap: "8.0",
		MaxSMClockMHz: 1410, IdleW: 55, SMs: 108,
		PeerLink: GPULink{Kind: "NVLink3 (NVSwitch)", GBps: 300, LatencyUs: 9}},
	{Key: "L40S", Names: []string{"NVIDIA L40S"},
		Architecture: "Ada Lovelace", MemoryGiB: 48, FP32TFLOPS: 91.6, TF32TFLOPS: 183, BF16TFLOPS: 362, HBMGBps: 864,
		PCIeGen: 4, PCIeWidth: 16, TDPW: 350, ComputeCap: "8.9",
		MaxSMClockMHz: 2520, IdleW: 35, SMs: 142},
	{Key: "H100", Names: []string{"NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"},
		Architecture: "Hopper", MemoryGiB: 80, FP32TFLOPS: 67, TF32TFLOPS: 494.7, BF16TFLOPS: 989.4, HBMGBps: 3350,
		PCIeGen: 5, PCIeWidth: 16, TDPW: 700, NVLinkGBps: 450, ComputeCap: "9.0",
		MaxSMClockMHz: 1980, IdleW: 70, SMs: 132,
		PeerLink: GPULink{Kind: "NVLink4 (NVSwitch)", GBps: 450, LatencyUs: 9}},
	{Key: "H100-PCIE", Names: []string{"NVIDIA H100 PCIe"},
		Architecture: "Hopper", MemoryGiB: 80, FP32TFLOPS: 51, TF32TFLOPS: 378, BF16TFLOPS: 756, HBMGBps: 2000,
		PCIeGen: 5, PCIeWidth: 16, TDPW: 350, ComputeCap: "9.0",
		MaxSMClockMHz: 1755, IdleW: 50, SMs: 114},
	{Key: "H200", Names: []string{"NVIDIA H200"},
		Architecture: "Hopper", MemoryGiB: 140.4, FP32TFLOPS: 67, TF32TFLOPS: 494.7, BF16TFLOPS: 989.4, HBMGBps: 4800,
		PCIeGen: 5, PCIeWidth: 16, TDPW: 700, NVLinkGBps: 450, ComputeCap: "9.0",
		MaxSMClockMHz: 1980, IdleW: 80, SMs: 132,
		PeerLink: GPULink{Kind: "NVLink4 (NVSwitch)", GBps: 450, LatencyUs: 9}},
	{Key: "H200-NVL", Names: []string{"NVIDIA H200 NVL"},
		Architecture: "Hopper", MemoryGiB: 140.4, FP32TFLOPS: 60, TF32TFLOPS: 417.5, BF16TFLOPS: 835.5, HBMGBps: 4800,
		PCIeGen: 5, PCIeWidth: 16, TDPW: 600, ComputeCap: "9.0",
		MaxSMClockMHz: 1785, IdleW: 70, SMs: 132},
	{Key: "B200", Names: []string{"NVIDIA B200"},
		Architecture: "Blackwell", MemoryGiB: 179, FP32TFLOPS: 75, TF32TFLOPS: 1100, BF16TFLOPS: 2250, HBMGBps: 8000,
		PCIeGen: 5, PCIeWidth: 16, TDPW: 1000, NVLinkGBps: 900, ComputeCap: "10.0",
		MaxSMClockMHz: 1965, IdleW: 140, SMs: 148,
		PeerLink: GPULink{Kind: "NVLink5 (NVSwitch)", GBps: 900, LatencyUs: 9}},
	{Key: "GB200", Names: []string{"NVIDIA GB200"},
		Architecture: "Blackwell", MemoryGiB: 184, FP32TFLOPS: 80, TF32TFLOPS: 1250, BF16TFLOPS: 2500, HBMGBps: 8000,
		PCIeGen: 0, PCIeWidth: 0, TDPW: 1200, NVLinkGBps: 900, ComputeCap: "10.0",
		MaxSMClockMHz: 2062, IdleW: 150, SMs: 148,
		PeerLink: GPULink{Kind: "NVLink5 (NVL72 switch tray)", GBps: 900, LatencyUs: 9}},
	{Key: "RTX-PRO-6000", Names: []string{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"},
		Architecture: "Blackwell", MemoryGiB: 95, FP32TFLOPS: 117, TF32TFLOPS: 126, BF16TFLOPS: 504, HBMGBps: 1597,
		PCIeGen: 5, PCIeWidth: 16, TDPW: 600, ComputeCap: "12.0",
		MaxSMClockMHz: 2617, IdleW: 30, SMs: 188},
	// A100 40GB: the 80 GB card's compute with 40 GB of HBM2 at 1,555 GB/s (it was read as the 80 GB
	// one: twice its KV cache, a third more bandwidth).
	{Key: "A100-40GB", Names: []string{"NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"},
		Architecture: "Ampere", MemoryGiB: 40, FP32TFLOPS: 19.5, TF32TFLOPS: 156, BF16TFLOPS: 312, HBMGBps: 1555,
		PCIeGen: 4, PCIeWidth: 16, TDPW: 400, NVLinkGBps: 300, ComputeCap: "8.0",
		MaxSMClockMHz: 1410, IdleW: 55, SMs: 108,
		PeerLink: GPULink{Kind: "NVLink3 (NVSwitch)", GBps: 300, LatencyUs: 9}},
	// L4: 24 GB GDDR6 (nvidia-smi reports 23,034 MiB), the TF32 and BF16 figures as the datasheet
	// gives them (with sparsity, as L40S's).
	{Key: "L4", Names: []string{"NVIDIA L4"},
		Architecture: "Ada Lovelace", MemoryGiB: 22.5, FP32TFLOPS: 30.3, TF32TFLOPS: 120, BF16TFLOPS: 242, HBMGBps: 300,
		PCIeGen: 4, PCIeWidth: 16, TDPW: 72, ComputeCap: "8.9",
		MaxSMClockMHz: 2040, IdleW: 16, SMs: 58},
}
