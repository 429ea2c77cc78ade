package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuvet/gpuvet/internal/results"
)

// ErrNoDriver is returned by OpenNVML when libnvidia-ml.so.1 cannot be loaded.
var ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so.1 not loadable)")

// nvmlSource reads inventory and telemetry through NVML and watches XID events while open.
type nvmlSource struct {
	lib     nvml.Interface
	ext     nvml.ExtendedInterface
	devices []nvml.Device
	start   time.Time

	mu   sync.Mutex
	xids map[int][]results.XIDEvent // by GPU index
	set  nvml.EventSet
	stop chan struct{}
	done chan struct{}
}

// OpenNVML loads NVML, finds the GPUs and starts watching XID events. Close it when done.
func OpenNVML() (Source, error) { return openNVML(nvml.New()) }

// openNVML opens a given NVML (the real library, or go-nvml's mock in tests).
func openNVML(lib nvml.Interface) (*nvmlSource, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, ErrNoDriver
		}
		return nil, fmt.Errorf("NVML init failed: %s (is the NVIDIA driver loaded? try `nvidia-smi`)", lib.ErrorString(ret))
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("nvmlDeviceGetCount: %s", lib.ErrorString(ret))
	}
	s := &nvmlSource{lib: lib, ext: lib.Extensions(), start: time.Now(), xids: map[int][]results.XIDEvent{}}
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("nvmlDeviceGetHandleByIndex(%d): %s", i, lib.ErrorString(ret))
		}
		s.devices = append(s.devices, d)
	}
	s.watchXIDs()
	return s, nil
}

// has reports whether the loaded libnvidia-ml exports sym: calling a symbol an older driver lacks
// would kill the process (lazy binding), so every call past the basics is guarded by it.
func (s *nvmlSource) has(sym string) bool { return s.ext.LookupSymbol(sym) == nil }

// call runs f when sym exists; otherwise, or when f returns NOT_SUPPORTED or another error, it notes why.
func (s *nvmlSource) call(notes *[]string, sym string, f func() nvml.Return) bool {
	if !s.has(sym) {
		*notes = append(*notes, sym+": not in this driver's NVML")
		return false
	}
	ret := f()
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
		*notes = append(*notes, sym+": not supported")
	default:
		*notes = append(*notes, sym+": "+s.lib.ErrorString(ret))
	}
	return false
}

// get calls read through s.call and hands its value to set when it succeeds.
func get[T any](s *nvmlSource, notes *[]string, sym string, read func() (T, nvml.Return), set func(T)) bool {
	return s.call(notes, sym, func() nvml.Return {
		v, r := read()
		if r == nvml.SUCCESS {
			set(v)
		}
		return r
	})
}

// device is GPU i, or an error naming how many GPUs NVML sees.
func (s *nvmlSource) device(i int) (nvml.Device, error) {
	if i < 0 || i >= len(s.devices) {
		return nil, fmt.Errorf("GPU %d: no such GPU (NVML sees %d)", i, len(s.devices))
	}
	return s.devices[i], nil
}

func (s *nvmlSource) GPUs() ([]results.GPUInfo, error) {
	driver, _ := s.lib.SystemGetDriverVersion()
	cudaVer := ""
	if s.has("nvmlSystemGetCudaDriverVersion_v2") {
		if v, ret := s.lib.SystemGetCudaDriverVersion_v2(); ret == nvml.SUCCESS {
			cudaVer = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
		}
	}
	out := make([]results.GPUInfo, 0, len(s.devices))
	for i, d := range s.devices {
		out = append(out, s.info(i, d, driver, cudaVer))
	}
	return out, nil
}

func (s *nvmlSource) info(i int, d nvml.Device, driver, cudaVer string) results.GPUInfo {
	var notes []string
	g := results.GPUInfo{Index: i, DriverVersion: driver, CUDAVersion: cudaVer, NUMANode: -1}
	str := func(sym string, dst *string, read func() (string, nvml.Return)) {
		get(s, &notes, sym, read, func(v string) { *dst = v })
	}
	str("nvmlDeviceGetName", &g.Name, d.GetName)
	str("nvmlDeviceGetUUID", &g.UUID, d.GetUUID)
	str("nvmlDeviceGetSerial", &g.Serial, d.GetSerial)
	str("nvmlDeviceGetVbiosVersion", &g.VBIOS, d.GetVbiosVersion)
	str("nvmlDeviceGetPciInfo_v3", &g.PCIBusID, func() (string, nvml.Return) {
		p, r := d.GetPciInfo()
		return cString(p.BusId[:]), r
	})
	if g.PCIBusID != "" {
		n, why := NUMANode(g.PCIBusID)
		g.NUMANode = n
		if why != "" {
			notes = append(notes, why)
		}
	} else {
		notes = append(notes, "numa_node unknown: no PCI bus id to look up in sysfs")
	}
	str("nvmlDeviceGetCudaComputeCapability", &g.ComputeCapability, func() (string, nvml.Return) {
		maj, min, r := d.GetCudaComputeCapability()
		return fmt.Sprintf("%d.%d", maj, min), r
	})
	get(s, &notes, "nvmlDeviceGetArchitecture", d.GetArchitecture, func(a nvml.DeviceArchitecture) { g.Architecture = archName(a) })
	get(s, &notes, "nvmlDeviceGetMemoryInfo", d.GetMemoryInfo, func(m nvml.Memory) {
		g.MemoryTotalMiB, g.MemoryUsedMiB = int64(m.Total>>20), new(int64(m.Used>>20))
	})
	s.pcie(d, &g, &notes)
	get(s, &notes, "nvmlDeviceGetEnforcedPowerLimit", d.GetEnforcedPowerLimit, func(mw uint32) { g.PowerLimitW = new(float64(mw) / 1000) })
	get(s, &notes, "nvmlDeviceGetPowerUsage", d.GetPowerUsage, func(mw uint32) { g.PowerDrawW = new(float64(mw) / 1000) })
	get(s, &notes, "nvmlDeviceGetMaxClockInfo", func() (uint32, nvml.Return) { return d.GetMaxClockInfo(nvml.CLOCK_SM) },
		func(c uint32) { g.MaxSMClockMHz = new(int(c)) })
	get(s, &notes, "nvmlDeviceGetClockInfo", func() (uint32, nvml.Return) { return d.GetClockInfo(nvml.CLOCK_SM) },
		func(c uint32) { g.SMClockMHz = new(int(c)) })
	get(s, &notes, "nvmlDeviceGetTemperature", func() (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) },
		func(t uint32) { g.TemperatureC = new(int(t)) })
	get(s, &notes, "nvmlDeviceGetPersistenceMode", d.GetPersistenceMode, func(m nvml.EnableState) { g.Persistence = new(m == nvml.FEATURE_ENABLED) })
	s.ecc(d, &g, &notes)
	s.recoveryAction(d, &g, &notes)
	s.fabric(d, &g, &notes)
	if mask, ok := s.reasons(d, &notes); ok {
		g.ClockEvents = ClockEvents(mask)
	}
	g.XIDs = s.xidsOf(i)
	g.Unsupported = notes
	return g
}

func (s *nvmlSource) pcie(d nvml.Device, g *results.GPUInfo, notes *[]string) {
	get(s, notes, "nvmlDeviceGetCurrPcieLinkGeneration", d.GetCurrPcieLinkGeneration, func(v int) { g.PCIe.GenCurrent = v })
	get(s, notes, "nvmlDeviceGetMaxPcieLinkGeneration", d.GetMaxPcieLinkGeneration, func(v int) { g.PCIe.GenMax = v })
	get(s, notes, "nvmlDeviceGetCurrPcieLinkWidth", d.GetCurrPcieLinkWidth, func(v int) { g.PCIe.WidthCurrent = v })
	get(s, notes, "nvmlDeviceGetMaxPcieLinkWidth", d.GetMaxPcieLinkWidth, func(v int) { g.PCIe.WidthMax = v })
}

func (s *nvmlSource) ecc(d nvml.Device, g *results.GPUInfo, notes *[]string) {
	get(s, notes, "nvmlDeviceGetEccMode", func() (nvml.EnableState, nvml.Return) {
		cur, _, r := d.GetEccMode()
		return cur, r
	}, func(cur nvml.EnableState) { g.ECCEnabled = new(cur == nvml.FEATURE_ENABLED) })
	counter := func(dst **int64, typ nvml.MemoryErrorType, ct nvml.EccCounterType) {
		get(s, notes, "nvmlDeviceGetTotalEccErrors", func() (uint64, nvml.Return) { return d.GetTotalEccErrors(typ, ct) },
			func(n uint64) { *dst = new(int64(n)) })
	}
	if g.ECCEnabled != nil && *g.ECCEnabled {
		counter(&g.ECC.VolatileUncorrected, nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		counter(&g.ECC.AggregateUncorrected, nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)
		counter(&g.ECC.VolatileCorrected, nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		counter(&g.ECC.AggregateCorrected, nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC)
	}
	get(s, notes, "nvmlDeviceGetRetiredPagesPendingStatus", d.GetRetiredPagesPendingStatus,
		func(st nvml.EnableState) { g.RetiredPagesPending = new(st == nvml.FEATURE_ENABLED) })
	get(s, notes, "nvmlDeviceGetRemappedRows", func() (*results.RemappedRows, nvml.Return) {
		corr, unc, pend, fail, r := d.GetRemappedRows()
		return &results.RemappedRows{Correctable: corr, Uncorrectable: unc, Pending: pend, Failure: fail}, r
	}, func(rr *results.RemappedRows) { g.RemappedRows = rr })
}

// reasons reads the clock-event mask: nvmlDeviceGetCurrentClocksEventReasons from driver 535,
// nvmlDeviceGetCurrentClocksThrottleReasons before.
func (s *nvmlSource) reasons(d nvml.Device, notes *[]string) (mask uint64, ok bool) {
	sym, read := "nvmlDeviceGetCurrentClocksThrottleReasons", d.GetCurrentClocksThrottleReasons
	if s.has("nvmlDeviceGetCurrentClocksEventReasons") {
		sym, read = "nvmlDeviceGetCurrentClocksEventReasons", d.GetCurrentClocksEventReasons
	}
	ok = get(s, notes, sym, read, func(m uint64) { mask = m })
	return mask, ok
}

// Sample reads one telemetry point. Fields NVML cannot give stay zero; an error only when none could be read.
func (s *nvmlSource) Sample(i int) (results.PowerSample, error) {
	d, err := s.device(i)
	if err != nil {
		return results.PowerSample{}, err
	}
	ps := results.PowerSample{T: time.Since(s.start).Seconds()}
	var notes []string
	get(s, &notes, "nvmlDeviceGetPowerUsage", d.GetPowerUsage, func(mw uint32) { ps.PowerW = float64(mw) / 1000 })
	get(s, &notes, "nvmlDeviceGetClockInfo", func() (uint32, nvml.Return) { return d.GetClockInfo(nvml.CLOCK_SM) },
		func(c uint32) { ps.SMClockMHz = int(c) })
	get(s, &notes, "nvmlDeviceGetTemperature", func() (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) },
		func(t uint32) { ps.TempC = int(t) })
	if m, ok := s.reasons(d, &notes); ok {
		ps.ClockReasons = m
	}
	get(s, &notes, "nvmlDeviceGetUtilizationRates", d.GetUtilizationRates, func(u nvml.Utilization) { ps.UtilPct, ps.MemUtilPct = int(u.Gpu), int(u.Memory) })
	// Telemetry under the load (issue 33): not counted towards "no telemetry" (older drivers and
	// some GPUs lack them; the five above decide).
	var extra []string
	get(s, &extra, "nvmlDeviceGetClockInfo", func() (uint32, nvml.Return) { return d.GetClockInfo(nvml.CLOCK_MEM) },
		func(c uint32) { ps.MemClockMHz = int(c) })
	get(s, &extra, "nvmlDeviceGetMemoryInfo", d.GetMemoryInfo, func(m nvml.Memory) { ps.MemUsedMiB = int64(m.Used >> 20) })
	if len(notes) >= 5 {
		return ps, fmt.Errorf("GPU %d: no telemetry: %s", i, strings.Join(notes, "; "))
	}
	return ps, nil
}

// watchXIDs registers every GPU for XID critical-error events and collects them until Close.
// Where the driver or a GPU does not allow it, the GPU gets no watcher and says so in its notes.
func (s *nvmlSource) watchXIDs() {
	if !s.has("nvmlEventSetCreate") || !s.has("nvmlDeviceRegisterEvents") || !s.has("nvmlEventSetWait_v2") {
		return
	}
	set, ret := s.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return
	}
	registered := 0
	for _, d := range s.devices {
		if d.RegisterEvents(nvml.EventTypeXidCriticalError, set) == nvml.SUCCESS {
			registered++
		}
	}
	if registered == 0 {
		set.Free()
		return
	}
	s.set, s.stop, s.done = set, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			ev, ret := set.Wait(500) // ms: bounds how long Close waits
			switch ret {
			case nvml.SUCCESS:
			case nvml.ERROR_TIMEOUT:
				continue
			default:
				// An error answered at once (a GPU lost from the bus): wait as a timeout would,
				// not spin a core for the rest of the run.
				select {
				case <-s.stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			s.recordXID(ev)
		}
	}()
}

func (s *nvmlSource) recordXID(ev nvml.EventData) {
	// The event's device is the handle gpuvet registered: matched by handle first, since a GPU
	// whose XID is "fallen off the bus" no longer answers nvmlDeviceGetUUID; by UUID after that.
	idx := slices.IndexFunc(s.devices, func(d nvml.Device) bool { return ev.Device != nil && d == ev.Device })
	if idx < 0 && ev.Device != nil {
		if uuid, ret := ev.Device.GetUUID(); ret == nvml.SUCCESS {
			for i, d := range s.devices {
				if u, _ := d.GetUUID(); u == uuid {
					idx = i
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.xids[idx] = append(s.xids[idx], results.XIDEvent{Time: time.Now().UTC(), XID: ev.EventData, Note: XIDNote(ev.EventData)})
}

func (s *nvmlSource) xidsOf(i int) []results.XIDEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(append([]results.XIDEvent(nil), s.xids[i]...), s.xids[-1]...)
}

func (s *nvmlSource) Close() error {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.set.Free()
		s.stop = nil
	}
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS && ret != nvml.ERROR_UNINITIALIZED {
		return fmt.Errorf("nvmlShutdown: %s", s.lib.ErrorString(ret))
	}
	return nil
}

// XIDNote gives the common XIDs a short meaning (NVIDIA's XID catalogue); others get none.
func XIDNote(xid uint64) string {
	return map[uint64]string{
		13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
		45: "preemptive cleanup", 48: "double-bit ECC error", 61: "internal micro-controller breakpoint",
		62: "internal micro-controller halt", 63: "ECC page retirement / row remapping event",
		64: "ECC page retirement / row remapper failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
		92: "high single-bit ECC error rate", 94: "contained ECC error", 95: "uncontained ECC error",
		119: "GSP RPC timeout", 120: "GSP error",
	}[xid]
}

func archName(a nvml.DeviceArchitecture) string {
	names := map[nvml.DeviceArchitecture]string{
		nvml.DEVICE_ARCH_KEPLER: "Kepler", nvml.DEVICE_ARCH_MAXWELL: "Maxwell", nvml.DEVICE_ARCH_PASCAL: "Pascal",
		nvml.DEVICE_ARCH_VOLTA: "Volta", nvml.DEVICE_ARCH_TURING: "Turing", nvml.DEVICE_ARCH_AMPERE: "Ampere",
		nvml.DEVICE_ARCH_ADA: "Ada Lovelace", nvml.DEVICE_ARCH_HOPPER: "Hopper",
	}
	if n, ok := names[a]; ok {
		return n
	}
	if a == 9 || a == 10 { // Blackwell (nvml.h 12.8+: 9 = Blackwell; go-nvml may not name it yet)
		return "Blackwell"
	}
	return fmt.Sprintf("arch-%d", a)
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
