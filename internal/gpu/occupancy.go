package gpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Occupier is a Source that can say what else is on a GPU: the processes the driver lists, memory
// in use, utilisation and power (NVML, a captured nvidia-smi XML, the simulator).
type Occupier interface {
	Occupancy(i int) (results.Occupancy, error)
}

// procRoot is where process information lives; tests point it elsewhere.
var procRoot = "/proc"

// Occupancy reads GPU i's running compute and graphics processes, memory in use, utilisation and
// power. A process is Own when it is gpuvet or one of its descendants (the engine and its workers),
// Hidden when its PID is not in this PID namespace (NVML in a container may list the host's PIDs).
func (s *nvmlSource) Occupancy(i int) (results.Occupancy, error) {
	d, err := s.device(i)
	if err != nil {
		return results.Occupancy{}, err
	}
	var o results.Occupancy
	for _, k := range []struct {
		sym, typ string
		get      func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{"nvmlDeviceGetComputeRunningProcesses", "compute", d.GetComputeRunningProcesses},
		{"nvmlDeviceGetGraphicsRunningProcesses", "graphics", d.GetGraphicsRunningProcesses},
	} {
		get(s, &o.Notes, k.sym, k.get, func(ps []nvml.ProcessInfo) {
			o.ProcessesListed = true
			for _, p := range ps {
				o.Processes = addProcess(o.Processes, s.process(p, k.typ))
			}
		})
	}
	get(s, &o.Notes, "nvmlDeviceGetMemoryInfo", d.GetMemoryInfo, func(m nvml.Memory) { o.MemoryUsedMiB = new(int64(m.Used >> 20)) })
	get(s, &o.Notes, "nvmlDeviceGetUtilizationRates", d.GetUtilizationRates, func(u nvml.Utilization) { o.UtilPct = new(int(u.Gpu)) })
	get(s, &o.Notes, "nvmlDeviceGetPowerUsage", d.GetPowerUsage, func(mw uint32) { o.PowerW = new(float64(mw) / 1000) })
	get(s, &o.Notes, "nvmlDeviceGetEnforcedPowerLimit", d.GetEnforcedPowerLimit, func(mw uint32) { o.PowerLimitW = new(float64(mw) / 1000) })
	o.Samples = 1
	return o, nil
}

func (s *nvmlSource) process(p nvml.ProcessInfo, typ string) results.GPUProcess {
	gp := results.GPUProcess{PID: int(p.Pid), Type: typ}
	// NVML gives ^0 (NVML_VALUE_NOT_AVAILABLE) where it cannot say (MIG, some VMs).
	if p.UsedGpuMemory != ^uint64(0) {
		gp.UsedMiB = new(int64(p.UsedGpuMemory >> 20))
	}
	gp.Name, gp.Own, gp.Hidden = describeProcess(gp.PID, os.Getpid())
	if gp.Hidden && s.has("nvmlSystemGetProcessName") {
		if n, r := s.lib.SystemGetProcessName(gp.PID); r == nvml.SUCCESS {
			gp.Name = baseName(n)
		}
	}
	return gp
}

// addProcess adds p unless its PID is listed already (a process can be both compute and graphics).
func addProcess(ps []results.GPUProcess, p results.GPUProcess) []results.GPUProcess {
	for i := range ps {
		if ps[i].PID == p.PID {
			ps[i].Type += "+" + p.Type
			return ps
		}
	}
	return append(ps, p)
}

// describeProcess reads pid's name from /proc and whether self is it or one of its ancestors (a
// process gpuvet started, however deep: the watchdog, the engine, its workers). hidden: no such PID
// here.
func describeProcess(pid, self int) (name string, own, hidden bool) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/comm", procRoot, pid))
	if err != nil {
		return "", false, true
	}
	name = strings.TrimSpace(string(b))
	for p, hops := pid, 0; p > 1 && hops < 64; hops++ {
		if p == self {
			return name, true, false
		}
		p = parentPID(p)
	}
	return name, false, false
}

// parentPID is field 4 of /proc/PID/stat (after the command in parentheses, which may hold spaces).
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procRoot, pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func baseName(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }
