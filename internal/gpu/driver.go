package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The driver's own signals in the inventory: the GPU recovery action it asks for and the NVLink
// fabric registration, read from NVML and from nvidia-smi's XML alike.

// kmsgPath is the kernel log a live host's source reads; tests point it elsewhere.
var kmsgPath = "/dev/kmsg"

// KernelLog reads the host's kernel ring buffer (/dev/kmsg): the NVIDIA driver's lines since boot.
func (s *nvmlSource) KernelLog() (KernelLogText, error) { return ReadKmsg(kmsgPath) }

// NormalizeRecoveryAction writes nvidia-smi's <gpu_recovery_action> ("None", "GPU Reset", "Reset",
// "Node Reboot", "Drain P2P", "Drain and Reset", any case or spacing) as a results.Recovery* value;
// "" for N/A or nothing, and the words verbatim when they are none of these (judged as needing
// attention).
func NormalizeRecoveryAction(s string) string {
	s = strings.TrimSpace(s)
	words := strings.ToLower(strings.Join(strings.Fields(strings.NewReplacer("_", " ", "-", " ").Replace(s)), " "))
	if a, ok := map[string]string{"": "", "n/a": "", "[n/a]": "", "not supported": "", "[not supported]": "",
		"none": results.RecoveryNone, "gpu reset": results.RecoveryGPUReset, "reset": results.RecoveryGPUReset,
		"node reboot": results.RecoveryNodeReboot, "reboot": results.RecoveryNodeReboot,
		"drain p2p": results.RecoveryDrainP2P, "drain peer to peer": results.RecoveryDrainP2P,
		"drain and reset": results.RecoveryDrainAndReset, "drain & reset": results.RecoveryDrainAndReset,
	}[words]; ok {
		return a
	}
	return s
}

// recoveryFromNVML names NVML's nvmlDeviceGpuRecoveryAction_t.
func recoveryFromNVML(v uint64) string {
	if a, ok := map[nvml.DeviceGpuRecoveryAction]string{
		nvml.GPU_RECOVERY_ACTION_NONE: results.RecoveryNone, nvml.GPU_RECOVERY_ACTION_GPU_RESET: results.RecoveryGPUReset,
		nvml.GPU_RECOVERY_ACTION_NODE_REBOOT: results.RecoveryNodeReboot, nvml.GPU_RECOVERY_ACTION_DRAIN_P2P: results.RecoveryDrainP2P,
		nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET: results.RecoveryDrainAndReset,
	}[nvml.DeviceGpuRecoveryAction(v)]; ok {
		return a
	}
	return fmt.Sprintf("NVML recovery action %d", v)
}

// fieldUint reads an integer NVML field value of any width (false: a double, or a type NVML added
// since). unsigned long is 64 bits wide on Linux (LP64), where gpuvet reads NVML: read as 32 bits, a
// counter past 2^32 would wrap.
func fieldUint(f nvml.FieldValue) (uint64, bool) {
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_SIGNED_INT:
		return uint64(binary.LittleEndian.Uint32(f.Value[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return binary.LittleEndian.Uint64(f.Value[:]), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(binary.LittleEndian.Uint16(f.Value[:2])), true
	}
	return 0, false
}

// recoveryAction reads NVML_FI_DEV_GET_GPU_RECOVERY_ACTION through nvmlDeviceGetFieldValues.
func (s *nvmlSource) recoveryAction(d nvml.Device, g *results.GPUInfo, notes *[]string) {
	s.call(notes, "nvmlDeviceGetFieldValues", func() nvml.Return {
		vals := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
		r := d.GetFieldValues(vals) // first: the field's own return is read after the call fills it
		if r = cmp.Or(r, nvml.Return(vals[0].NvmlReturn)); r != nvml.SUCCESS {
			return r
		}
		v, ok := fieldUint(vals[0])
		if !ok {
			return nvml.ERROR_UNKNOWN
		}
		g.RecoveryAction = recoveryFromNVML(v)
		return nvml.SUCCESS
	})
}

// fabricInfoV3 calls nvmlDeviceGetGpuFabricInfoV for its version 3 (with the health summary);
// tests replace it (go-nvml's mock cannot build the handler).
var fabricInfoV3 = func(d nvml.Device) (nvml.GpuFabricInfo_v3, nvml.Return) {
	fi, r := d.GetGpuFabricInfoV().V3()
	if r == nvml.ERROR_ARGUMENT_VERSION_MISMATCH { // a driver before the health summary: version 2
		v2, r2 := d.GetGpuFabricInfoV().V2()
		return nvml.GpuFabricInfo_v3{State: v2.State, Status: v2.Status}, r2
	}
	return fi, r
}

// fabric reads the NVLink fabric registration: nvmlDeviceGetGpuFabricInfoV (state, status and
// health summary), else nvmlDeviceGetGpuFabricInfo (state and status). Not supported: nil.
func (s *nvmlSource) fabric(d nvml.Device, g *results.GPUInfo, notes *[]string) {
	sym, read := "nvmlDeviceGetGpuFabricInfo", func() (nvml.GpuFabricInfo_v3, nvml.Return) {
		fi, r := d.GetGpuFabricInfo()
		return nvml.GpuFabricInfo_v3{State: fi.State, Status: fi.Status}, r
	}
	if s.has("nvmlDeviceGetGpuFabricInfoV") {
		sym, read = "nvmlDeviceGetGpuFabricInfoV", func() (nvml.GpuFabricInfo_v3, nvml.Return) {
			return fabricInfoV3(d)
		}
	}
	get(s, notes, sym, read, func(fi nvml.GpuFabricInfo_v3) {
		g.Fabric = fabricFromNVML(fi.State, nvml.Return(fi.Status), fi.HealthSummary, s.lib.ErrorString)
	})
}

// fabricFromNVML writes NVML's fabric info the way nvidia-smi does; nil when not supported.
func fabricFromNVML(state uint8, status nvml.Return, health uint8, errString func(nvml.Return) string) *results.Fabric {
	f := &results.Fabric{}
	switch state {
	case nvml.GPU_FABRIC_STATE_NOT_SUPPORTED:
		return nil
	case nvml.GPU_FABRIC_STATE_NOT_STARTED:
		f.State = "Not Started"
	case nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		f.State = "In Progress"
	case nvml.GPU_FABRIC_STATE_COMPLETED:
		f.State = "Completed"
		f.Status = "Success"
		if status != nvml.SUCCESS {
			f.Status = errString(status)
		}
	default:
		f.State = fmt.Sprintf("state %d", state)
	}
	f.Health = map[uint8]string{nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY: "Healthy", nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY: "Unhealthy",
		nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY: "Limited Capacity"}[health]
	return f
}

// fabricFromXML reads nvidia-smi's <fabric>: nil when its state is N/A (no fabric to register).
func fabricFromXML(state, status, health string) *results.Fabric {
	if na(state) == "" {
		return nil
	}
	return &results.Fabric{State: na(state), Status: na(status), Health: na(health)}
}
