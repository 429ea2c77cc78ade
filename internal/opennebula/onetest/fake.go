// Package onetest is a fake OpenNebula XML-RPC front-end for tests: a host pool with PCI devices,
// template instantiate and allocate, VM states that move one step per poll, terminate and
// recover, and the failures a real front-end gives (bad credentials, NODE_AFFINITY with
// PIN_POLICY, an instantiate refused, a VM stuck in BOOT).
package onetest

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// PCI is one device of a host's monitoring.
type PCI struct {
	Short, Vendor, Class, Device string
	NUMA                         int // -1: not reported
	VMID                         int // -1: free
}

// Host is one hypervisor.
type Host struct {
	ID      int
	Name    string
	Cluster string
	State   int // 2 = MONITORED
	PCI     []PCI
}

// GPU is an H200 PCI entry (vendor 10de, class 0302) on NUMA node numa.
func GPU(short string, numa int) PCI {
	return PCI{Short: short, Vendor: "10de", Class: "0302", Device: "2335", NUMA: numa, VMID: -1}
}

// VM is one VM the fake holds.
type VM struct {
	ID       int
	Name     string
	Template string
	HostID   int
	State    int
	LCM      int
	IP       string
	Deleted  bool
	polls    int
	stopping int // info calls left before DONE after terminate-hard
}

// Server is the fake front-end.
type Server struct {
	Auth  string // the session string it accepts
	Hosts []Host
	// IPFor gives a VM its IP when it reaches RUNNING (VM name, host id → IP).
	IPFor func(name string, hostID int) string
	// FailCreateOn refuses instantiate/allocate on these host ids with this message.
	FailCreateOn map[int]string
	// StuckOn keeps VMs on these host ids in ACTIVE/BOOT forever.
	StuckOn map[int]bool
	// IgnoreTerminate leaves VMs where they are on terminate-hard (recover delete still works).
	IgnoreTerminate bool
	// TerminateSteps makes terminate-hard take as long as a real front-end's: the VM goes
	// ACTIVE/SHUTDOWN, then ACTIVE/EPILOG, and reaches DONE after this many one.vm.info calls
	// (0: DONE on the next one).
	TerminateSteps int

	URL   string
	srv   *httptest.Server
	mu    sync.Mutex
	vms   []*VM
	Calls []string // method names, in order
}

// Start serves the fake on loopback.
func Start(s *Server) *Server {
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL + "/RPC2"
	return s
}

// Close stops it.
func (s *Server) Close() { s.srv.Close() }

// VMs returns a copy of every VM ever created.
func (s *Server) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]VM, len(s.vms))
	for i, v := range s.vms {
		out[i] = *v
	}
	return out
}

// Live lists the VMs neither DONE nor deleted: what a run left behind.
func (s *Server) Live() []VM {
	var out []VM
	for _, v := range s.VMs() {
		if !v.Deleted && v.State != 6 {
			out = append(out, v)
		}
	}
	return out
}

type value struct {
	String  *string `xml:"string"`
	Int     *int    `xml:"int"`
	I4      *int    `xml:"i4"`
	Boolean *int    `xml:"boolean"`
	Text    string  `xml:",chardata"`
}

func (v value) any() any {
	switch {
	case v.String != nil:
		return *v.String
	case v.Int != nil:
		return *v.Int
	case v.I4 != nil:
		return *v.I4
	case v.Boolean != nil:
		return *v.Boolean == 1
	}
	return v.Text
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var call struct {
		Method string  `xml:"methodName"`
		Params []value `xml:"params>param>value"`
	}
	if err := xml.Unmarshal(b, &call); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	args := make([]any, len(call.Params))
	for i, p := range call.Params {
		args[i] = p.any()
	}
	s.mu.Lock()
	s.Calls = append(s.Calls, call.Method)
	ok, res, code := s.dispatch(call.Method, args)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	var val string
	switch x := res.(type) {
	case int:
		val = fmt.Sprintf("<i4>%d</i4>", x)
	case string:
		var e strings.Builder
		_ = xml.EscapeText(&e, []byte(x))
		val = "<string>" + e.String() + "</string>"
	}
	okv := 0
	if ok {
		okv = 1
	}
	fmt.Fprintf(w, `<?xml version="1.0"?><methodResponse><params><param><value><array><data><value><boolean>%d</boolean></value><value>%s</value><value><i4>%d</i4></value></data></array></value></param></params></methodResponse>`, okv, val, code)
}

// Error codes (OpenNebula's).
const (
	codeAuth     = 0x100
	codeNoExists = 0x400
	codeAction   = 0x800
	codeAllocate = 0x4000
)

func (s *Server) dispatch(method string, args []any) (bool, any, int) {
	if len(args) == 0 || args[0] != s.Auth {
		return false, "[" + method + "] User couldn't be authenticated, aborting call.", codeAuth
	}
	args = args[1:]
	switch method {
	case "one.hostpool.info":
		return true, s.hostPool(), 0
	case "one.template.instantiate":
		return s.create(str(args, 1), str(args, 3))
	case "one.vm.allocate":
		return s.create("", str(args, 0))
	case "one.vm.info":
		v := s.vm(num(args, 0))
		if v == nil || v.Deleted {
			return false, fmt.Sprintf("[one.vm.info] Error getting virtual machine [%d].", num(args, 0)), codeNoExists
		}
		s.step(v)
		return true, vmXML(v), 0
	case "one.vmpool.info":
		var b strings.Builder
		b.WriteString("<VM_POOL>")
		for _, v := range s.vms {
			if !v.Deleted && v.State != 6 {
				b.WriteString(vmXML(v))
			}
		}
		b.WriteString("</VM_POOL>")
		return true, b.String(), 0
	case "one.vm.action":
		v := s.vm(num(args, 1))
		if v == nil || v.Deleted {
			return false, "[one.vm.action] Error getting virtual machine", codeNoExists
		}
		if str(args, 0) != "terminate-hard" {
			return false, "unsupported action " + str(args, 0), codeAction
		}
		switch {
		case s.IgnoreTerminate:
		case s.TerminateSteps > 0:
			v.State, v.LCM, v.stopping = 3, 12, s.TerminateSteps // ACTIVE/SHUTDOWN, then EPILOG, then DONE
		default:
			v.State, v.LCM = 6, 0 // DONE on the next info
		}
		return true, v.ID, 0
	case "one.vm.recover":
		v := s.vm(num(args, 0))
		if v == nil || v.Deleted {
			return false, "[one.vm.recover] Error getting virtual machine", codeNoExists
		}
		if num(args, 1) == 3 {
			v.Deleted = true
		}
		return true, v.ID, 0
	}
	return false, "unknown method " + method, 0x1000
}

var nameRe = regexp.MustCompile(`(?m)^NAME = "([^"]*)"`)
var hostRe = regexp.MustCompile(`SCHED_REQUIREMENTS = "ID = (\d+)"`)

func (s *Server) create(name, tmpl string) (bool, any, int) {
	if strings.Contains(tmpl, "NODE_AFFINITY") && strings.Contains(tmpl, "PIN_POLICY") {
		return false, "[one.template.instantiate] Error allocating a new virtual machine template. NODE_AFFINITY cannot be used together with PIN_POLICY", codeAllocate
	}
	if name == "" {
		if m := nameRe.FindStringSubmatch(tmpl); m != nil {
			name = m[1]
		}
	}
	hostID := -1
	if m := hostRe.FindStringSubmatch(tmpl); m != nil {
		hostID, _ = strconv.Atoi(m[1])
	}
	if msg, bad := s.FailCreateOn[hostID]; bad {
		return false, "[one.template.instantiate] " + msg, codeAllocate
	}
	v := &VM{ID: len(s.vms) + 100, Name: name, Template: tmpl, HostID: hostID, State: 1}
	s.vms = append(s.vms, v)
	return true, v.ID, 0
}

// step moves a VM one state along per info call: PENDING → PROLOG → BOOT → RUNNING.
func (s *Server) step(v *VM) {
	if v.State == 6 || v.Deleted {
		return
	}
	v.polls++
	if v.stopping > 0 {
		v.stopping--
		v.LCM = 11 // EPILOG
		if v.stopping == 0 {
			v.State, v.LCM = 6, 0
		}
		return
	}
	switch {
	case v.State == 1:
		v.State, v.LCM = 3, 1
	case v.State == 3 && v.LCM == 1:
		v.LCM = 2
	case v.State == 3 && v.LCM == 2 && !s.StuckOn[v.HostID]:
		v.LCM = 3
		if s.IPFor != nil {
			v.IP = s.IPFor(v.Name, v.HostID)
		}
	}
}

func (s *Server) vm(id int) *VM {
	for _, v := range s.vms {
		if v.ID == id {
			return v
		}
	}
	return nil
}

func vmXML(v *VM) string {
	nic := ""
	if v.IP != "" {
		nic = "<NIC><IP>" + v.IP + "</IP></NIC>"
	}
	return fmt.Sprintf("<VM><ID>%d</ID><NAME>%s</NAME><STATE>%d</STATE><LCM_STATE>%d</LCM_STATE><TEMPLATE>%s</TEMPLATE><USER_TEMPLATE/></VM>", v.ID, v.Name, v.State, v.LCM, nic)
}

func (s *Server) hostPool() string {
	var b strings.Builder
	b.WriteString("<HOST_POOL>")
	for _, h := range s.Hosts {
		fmt.Fprintf(&b, "<HOST><ID>%d</ID><NAME>%s</NAME><STATE>%d</STATE><CLUSTER_ID>0</CLUSTER_ID><CLUSTER>%s</CLUSTER><HOST_SHARE><PCI_DEVICES>", h.ID, h.Name, h.State, h.Cluster)
		for _, p := range h.PCI {
			vmid := p.VMID
			for _, v := range s.vms {
				if v.HostID == h.ID && !v.Deleted && v.State != 6 && strings.Contains(v.Template, `"`+p.Short+`"`) {
					vmid = v.ID
				}
			}
			fmt.Fprintf(&b, "<PCI><ADDRESS>0000:%s</ADDRESS><SHORT_ADDRESS>%s</SHORT_ADDRESS><VENDOR>%s</VENDOR><CLASS>%s</CLASS><DEVICE>%s</DEVICE><DEVICE_NAME>GH100 [H200 SXM 141GB]</DEVICE_NAME><NUMA_NODE>%d</NUMA_NODE><VMID>%d</VMID></PCI>",
				p.Short, p.Short, p.Vendor, p.Class, p.Device, p.NUMA, vmid)
		}
		b.WriteString("</PCI_DEVICES></HOST_SHARE></HOST>")
	}
	b.WriteString("</HOST_POOL>")
	return b.String()
}

func str(a []any, i int) string { return arg(a, i, "") }
func num(a []any, i int) int    { return arg(a, i, -1) }

// arg is a[i] as a T, or def when it is missing or another type.
func arg[T any](a []any, i int, def T) T {
	if i < len(a) {
		if v, ok := a[i].(T); ok {
			return v
		}
	}
	return def
}
