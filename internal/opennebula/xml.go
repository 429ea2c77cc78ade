package opennebula

import (
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// HostInfo is one host of the pool, with its NVIDIA GPUs.
type HostInfo struct {
	ID        int
	Name      string
	State     int // 2 = MONITORED; anything else is not schedulable now
	ClusterID int
	Cluster   string
	GPUs      []GPU
}

// GPU is one NVIDIA GPU (vendor 10de, class 0302: 3D controller) from the host's PCI monitoring.
type GPU struct {
	ShortAddress string // "41:00.0": how a VM template asks for it
	Address      string // "0000:41:00.0"
	Device       string // PCI device id, e.g. "2335"
	Name         string // DEVICE_NAME
	NUMANode     *int   // nil when the host does not report it (or reports -1)
	VMID         int    // -1 when free
}

// Host states (OpenNebula's HostState).
const HostMonitored = 2

type xmlPCI struct {
	Address    string `xml:"ADDRESS"`
	Short      string `xml:"SHORT_ADDRESS"`
	Vendor     string `xml:"VENDOR"`
	Class      string `xml:"CLASS"`
	Device     string `xml:"DEVICE"`
	DeviceName string `xml:"DEVICE_NAME"`
	NUMANode   string `xml:"NUMA_NODE"`
	VMID       string `xml:"VMID"`
}

type xmlHost struct {
	ID        int      `xml:"ID"`
	Name      string   `xml:"NAME"`
	State     int      `xml:"STATE"`
	ClusterID int      `xml:"CLUSTER_ID"`
	Cluster   string   `xml:"CLUSTER"`
	PCI       []xmlPCI `xml:"HOST_SHARE>PCI_DEVICES>PCI"`
}

// ParseHostPool reads one.hostpool.info's HOST_POOL document and keeps, per host, the NVIDIA 3D
// controllers (vendor 10de, class 0302), sorted by PCI address.
func ParseHostPool(b []byte) ([]HostInfo, error) {
	var pool struct {
		XMLName xml.Name  `xml:"HOST_POOL"`
		Hosts   []xmlHost `xml:"HOST"`
	}
	if err := xml.Unmarshal(b, &pool); err != nil {
		return nil, fmt.Errorf("host pool: not a HOST_POOL document (%w)", err)
	}
	out := make([]HostInfo, 0, len(pool.Hosts))
	for _, h := range pool.Hosts {
		hi := HostInfo{ID: h.ID, Name: h.Name, State: h.State, ClusterID: h.ClusterID, Cluster: h.Cluster}
		for _, p := range h.PCI {
			if !strings.EqualFold(strings.TrimSpace(p.Vendor), "10de") || strings.TrimSpace(p.Class) != "0302" {
				continue
			}
			g := GPU{ShortAddress: strings.TrimSpace(p.Short), Address: strings.TrimSpace(p.Address), Device: p.Device, Name: p.DeviceName, VMID: -1}
			if g.ShortAddress == "" {
				return nil, fmt.Errorf("host %s: a GPU (vendor 10de) has no SHORT_ADDRESS in its PCI monitoring", h.Name)
			}
			if n, err := strconv.Atoi(strings.TrimSpace(p.NUMANode)); err == nil && n >= 0 {
				g.NUMANode = &n
			}
			// Unknown is not free: a GPU whose holder cannot be read may be a VM's.
			n, err := strconv.Atoi(strings.TrimSpace(p.VMID))
			if err != nil {
				return nil, fmt.Errorf("host %s: GPU %s has no VMID in its PCI monitoring (got %.40q; OpenNebula writes -1 for a free GPU)", h.Name, g.ShortAddress, p.VMID)
			}
			g.VMID = n
			hi.GPUs = append(hi.GPUs, g)
		}
		sort.Slice(hi.GPUs, func(i, j int) bool { return hi.GPUs[i].ShortAddress < hi.GPUs[j].ShortAddress })
		out = append(out, hi)
	}
	return out, nil
}

// VM is what gpuvet reads of one.vm.info.
type VM struct {
	ID       int
	Name     string
	State    int
	LCMState int
	IPs      []string
	Host     string // where it runs (last history record)
	Error    string // USER_TEMPLATE/ERROR: why a deployment failed
}

// VM states and LCM states gpuvet acts on (OpenNebula's VmState and LcmState).
const (
	VMActive   = 3
	VMDone     = 6
	VMPoweroff = 8
	VMFailure  = 7 // deprecated FAILED; treated as a failure

	LCMRunning       = 3
	LCMBootFailure   = 36
	LCMPrologFailure = 39
	LCMEpilogFailure = 40
)

type xmlVM struct {
	ID        int      `xml:"ID"`
	Name      string   `xml:"NAME"`
	State     int      `xml:"STATE"`
	LCMState  int      `xml:"LCM_STATE"`
	NICs      []string `xml:"TEMPLATE>NIC>IP"`
	Hostnames []string `xml:"HISTORY_RECORDS>HISTORY>HOSTNAME"`
	Error     string   `xml:"USER_TEMPLATE>ERROR"`
}

func (x xmlVM) vm() VM {
	v := VM{ID: x.ID, Name: x.Name, State: x.State, LCMState: x.LCMState, IPs: x.NICs, Error: strings.TrimSpace(x.Error)}
	if n := len(x.Hostnames); n > 0 {
		v.Host = x.Hostnames[n-1]
	}
	return v
}

// ParseVM reads one.vm.info's VM document.
func ParseVM(b []byte) (*VM, error) {
	var x xmlVM
	if err := xml.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("vm info: not a VM document (%w)", err)
	}
	v := x.vm()
	return &v, nil
}

// ParseVMPool reads one.vmpool.info's VM_POOL document.
func ParseVMPool(b []byte) ([]VM, error) {
	var pool struct {
		XMLName xml.Name `xml:"VM_POOL"`
		VMs     []xmlVM  `xml:"VM"`
	}
	if err := xml.Unmarshal(b, &pool); err != nil {
		return nil, fmt.Errorf("vm pool: not a VM_POOL document (%w)", err)
	}
	out := make([]VM, len(pool.VMs))
	for i, x := range pool.VMs {
		out[i] = x.vm()
	}
	return out, nil
}

// Phase says where a VM is on its way to serving, or that it failed.
func (v *VM) Phase() (running bool, failed string) {
	switch {
	case v.State == VMActive && v.LCMState == LCMRunning:
		return true, ""
	case v.State == VMActive && (v.LCMState == LCMBootFailure || v.LCMState == LCMPrologFailure || v.LCMState == LCMEpilogFailure):
		return false, fmt.Sprintf("LCM state %d (%s)", v.LCMState, lcmName(v.LCMState))
	case v.State == VMDone, v.State == VMPoweroff, v.State == VMFailure:
		return false, fmt.Sprintf("state %d (%s)", v.State, stateName(v.State))
	}
	return false, ""
}

// Where names the VM's state for messages: "ACTIVE/BOOT".
func (v *VM) Where() string {
	if v.State == VMActive {
		return "ACTIVE/" + lcmName(v.LCMState)
	}
	return stateName(v.State)
}

var (
	stateNames = map[int]string{0: "INIT", 1: "PENDING", 2: "HOLD", 3: "ACTIVE", 4: "STOPPED", 5: "SUSPENDED", 6: "DONE",
		7: "FAILED", 8: "POWEROFF", 9: "UNDEPLOYED", 10: "CLONING", 11: "CLONING_FAILURE"}
	lcmNames = map[int]string{0: "LCM_INIT", 1: "PROLOG", 2: "BOOT", 3: "RUNNING", 36: "BOOT_FAILURE", 39: "PROLOG_FAILURE",
		40: "EPILOG_FAILURE"}
)

func stateName(s int) string { return nameOf(stateNames, s) }
func lcmName(s int) string   { return nameOf(lcmNames, s) }

// nameOf is a state's name, or its number when it has none here.
func nameOf(names map[int]string, s int) string {
	if n, ok := names[s]; ok {
		return n
	}
	return strconv.Itoa(s)
}
