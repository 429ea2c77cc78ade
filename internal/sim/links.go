package sim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Link faults the simulator can inject on one GPU (FleetConfig.LinkFault "GPU[:KIND]"):
//   - down: its last two NVLinks are down, so its pairs run on 16 of 18 links;
//   - slow: every link up, but its peer copies reach 40 % of the links' peak (a degraded link);
//   - errors: every link up, but link 0's replay and CRC counters grow while the health phase runs.
var linkFaultKinds = []string{"down", "slow", "errors"}

// parseLinkFault reads "GPU" or "GPU:KIND" (KIND down by default); "" is no fault.
func parseLinkFault(s string, count int) (gpuFault, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return gpuFault{gpu: -1}, nil
	}
	idx, kind, ok := strings.Cut(s, ":")
	if !ok {
		kind = "down"
	}
	n, err := strconv.Atoi(strings.TrimSpace(idx))
	if err != nil || n < 0 || n >= count {
		return gpuFault{}, fmt.Errorf("link fault %q: want GPU[:KIND] with GPU 0–%d and KIND one of %s", s, count-1, strings.Join(linkFaultKinds, ", "))
	}
	if kind = strings.TrimSpace(kind); slices.Contains(linkFaultKinds, kind) {
		return gpuFault{gpu: n, kind: kind}, nil
	}
	return gpuFault{}, fmt.Errorf("link fault %q: kind %q unknown; want one of %s", s, kind, strings.Join(linkFaultKinds, ", "))
}

// Typical peer-copy efficiencies against the links' peak, measured on a 2 × H200 (NV18) with gpuvet
// (docs/interconnect-h200x2.md): one direction, both directions, and all-reduce bus bandwidth at 1 GiB.
const (
	peerUniEff  = 0.82
	peerBiEff   = 0.81
	allReduceBW = 0.70
	slowLinkEff = 0.40
	// allReduceLatencyUs is the fixed cost of one all-reduce (launch and handshake), which is what
	// small messages show.
	allReduceLatencyUs = 25.0
)

func (f *Fleet) busID(i int) string {
	return fmt.Sprintf("0000:%02x:00.0", 0x18+i*0x10%0xe0)
}

// Interconnect is the virtual host's topology: two GPUs' NVLinks join them directly, more go through
// NVSwitches; GPUs without NVLink share a PCIe host bridge. Each read grows the "errors" counters.
func (f *Fleet) Interconnect() (*results.Interconnect, error) {
	f.mu.Lock()
	f.linkReads++
	reads := uint64(f.linkReads)
	f.mu.Unlock()
	n, links, speed := f.cfg.Count, f.gpu.NVLinks(), f.gpu.NVLinkLinkGBps()
	ic := &results.Interconnect{Source: "sim"}
	for i := 0; i < n && links > 0; i++ {
		gl := results.GPULinks{GPU: i}
		for l := 0; l < links; l++ {
			link := results.NVLink{Link: l, Up: true, Version: nvlinkVersion(f.gpu.Architecture), GBps: speed, Errors: &results.LinkErrors{}}
			if f.linkDown(i, l) {
				link.Up, link.GBps = false, 0
			}
			if f.fault.gpu == i && f.fault.kind == "errors" && l == 0 {
				link.Errors = &results.LinkErrors{CRC: 3 * (reads - 1), Replay: 41 * (reads - 1)}
			}
			if link.Up {
				link.Remote, link.RemoteType = "", "switch"
				if n == 2 {
					link.Remote, link.RemoteType = f.busID(1-i), "gpu"
				}
			}
			gl.Links = append(gl.Links, link)
		}
		ic.Links = append(ic.Links, gl)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			// An HGX board: each GPU under its own PCIe switch, half of them on each CPU socket.
			p := results.GPUPair{A: a, B: b, Path: "PHB", PCIePath: "NODE", P2P: "ok"}
			if n > 2 && (a < n/2) != (b < n/2) {
				p.PCIePath = "SYS"
			}
			if links > 0 {
				k := min(f.upLinks(a), f.upLinks(b))
				p.Path, p.NVLinks, p.NVSwitch = fmt.Sprintf("NV%d", k), k, n > 2
			}
			ic.Pairs = append(ic.Pairs, p)
		}
	}
	return ic, nil
}

func nvlinkVersion(arch string) int {
	return map[string]int{"Ampere": 3, "Hopper": 4, "Blackwell": 5}[arch]
}

// linkDown says whether link l of GPU i is down: the faulty GPU's last two, and with two GPUs joined
// directly the same links of its partner (a link is down at both ends).
func (f *Fleet) linkDown(i, l int) bool {
	if f.fault.kind != "down" || l < f.gpu.NVLinks()-2 {
		return false
	}
	return f.fault.gpu == i || f.cfg.Count == 2
}

// upLinks is how many NVLinks GPU i has up.
func (f *Fleet) upLinks(i int) int {
	up := 0
	for l := 0; l < f.gpu.NVLinks(); l++ {
		if !f.linkDown(i, l) {
			up++
		}
	}
	return up
}

// peak is GPU i's one-direction peak: its NVLinks up, else PCIe. A pair's is its lower end's.
func (f *Fleet) peak(i int) float64 {
	if f.gpu.NVLinks() > 0 {
		return float64(f.upLinks(i)) * f.gpu.NVLinkLinkGBps()
	}
	return f.gpu.PCIeGBps()
}

// linkEff is the share of the peak GPU i's copies reach: lower for the "slow" fault.
func (f *Fleet) linkEff(i int, eff float64) float64 {
	if f.fault.gpu == i && f.fault.kind == "slow" {
		return slowLinkEff
	}
	return eff
}

// PeerCopy is a simulated peer copy between GPUs a and b, GB/s: the pair's peak × a typical
// efficiency (the slower end's), ± 1 % seeded noise.
func (f *Fleet) PeerCopy(a, b int) (uni, bi float64, err error) {
	if err := cmp.Or(f.check(a), f.check(b)); err != nil {
		return 0, 0, err
	}
	peak := min(f.peak(a), f.peak(b))
	uni = peak * min(f.linkEff(a, peerUniEff), f.linkEff(b, peerUniEff)) * f.noise(fmt.Sprintf("p2p/%d/%d", a, b))
	bi = 2 * peak * min(f.linkEff(a, peerBiEff), f.linkEff(b, peerBiEff)) * f.noise(fmt.Sprintf("p2pbi/%d/%d", a, b))
	return uni, bi, nil
}

// AllReduce is a simulated ring all-reduce over all the fleet's GPUs at each size: the slowest GPU's
// link bounds the bus bandwidth; a fixed latency bounds small messages.
func (f *Fleet) AllReduce(sizes []int64) []results.AllReduceSize {
	n := f.cfg.Count
	if n < 2 {
		return nil
	}
	bus := 0.0
	for i := 0; i < n; i++ {
		if t := f.peak(i) * f.linkEff(i, allReduceBW); bus == 0 || t < bus {
			bus = t
		}
	}
	factor := 2 * float64(n-1) / float64(n)
	var out []results.AllReduceSize
	for _, size := range sizes {
		secs := allReduceLatencyUs/1e6 + float64(size)*factor/(bus*1e9)
		alg := float64(size) / secs / 1e9
		out = append(out, results.AllReduceSize{Bytes: size, TimeUs: secs * 1e6, AlgBWGBps: alg, BusBWGBps: alg * factor})
	}
	return out
}

// noise is a seeded factor within ±1 %, the same for the same key and seed.
func (f *Fleet) noise(key string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", f.cfg.Seed, key)
	rng := rand.New(rand.NewPCG(h.Sum64(), 0))
	return 1 + 0.01*(2*rng.Float64()-1)
}
