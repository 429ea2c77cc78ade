package opennebula

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula/onetest"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

const auth = "oneadmin:s3cret-pw"

func twoHosts() []onetest.Host {
	return []onetest.Host{
		{ID: 0, Name: "node1", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0), onetest.GPU("c1:00.0", 1),
			{Short: "01:00.0", Vendor: "15b3", Class: "0207", NUMA: 0, VMID: -1}}},
		{ID: 1, Name: "node2", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", -1), onetest.GPU("c1:00.0", -1)}},
		{ID: 2, Name: "cpu1", Cluster: "cpu", State: 2},
	}
}

func fake(t *testing.T, s *onetest.Server) (*onetest.Server, *Client) {
	t.Helper()
	s.Auth = auth
	onetest.Start(s)
	t.Cleanup(s.Close)
	c, err := NewClient(s.URL, auth)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestDiscoverAndPlan(t *testing.T) {
	_, c := fake(t, &onetest.Server{Hosts: twoHosts()})
	pool, err := c.HostPool(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pool) != 3 || len(pool[0].GPUs) != 2 || *pool[0].GPUs[1].NUMANode != 1 || pool[1].GPUs[0].NUMANode != nil {
		t.Fatalf("pool %+v", pool)
	}
	p := PlanVMs(pool, nil, true, "r1", Sizing{TemplateID: 7, PinPolicy: "CORE"})
	if len(p.VMs) != 4 || p.VMs[3].Name != "gpuvet-r1-node2-g1" || p.VMs[1].Index[0] != 1 {
		t.Fatalf("per-GPU plan %+v", p.VMs)
	}
	if len(p.Skipped) != 1 || p.Skipped[0].Name != "cluster cpu" || !strings.Contains(p.Skipped[0].Reason, "10de") {
		t.Fatalf("skipped %+v", p.Skipped)
	}
	p = PlanVMs(pool, []string{"gpu", "nope"}, false, "r1", Sizing{})
	if len(p.VMs) != 2 || len(p.VMs[0].GPUs) != 2 || len(p.Skipped) != 1 || p.Skipped[0].Name != "cluster nope" {
		t.Fatalf("per-host plan %+v skipped %+v", p.VMs, p.Skipped)
	}
}

func TestTemplateNUMAOrPinNeverBoth(t *testing.T) {
	n0, n1 := 0, 1
	sz := Sizing{TemplateID: -1, Image: "ubuntu-gpu", DiskMB: 102400, Network: "private", VCPU: 16, MemoryMB: 65536, PinPolicy: "CORE", SSHPublicKey: "ssh-ed25519 AAAA x"}
	cases := []struct {
		name string
		gpus []GPU
		want string
		not  string
	}{
		{"known node", []GPU{{ShortAddress: "41:00.0", NUMANode: &n1}}, `TOPOLOGY = [ NODE_AFFINITY = "1" ]`, "PIN_POLICY"},
		{"unknown node", []GPU{{ShortAddress: "41:00.0"}}, `TOPOLOGY = [ PIN_POLICY = "CORE" ]`, "NODE_AFFINITY"},
		{"two nodes", []GPU{{ShortAddress: "41:00.0", NUMANode: &n0}, {ShortAddress: "c1:00.0", NUMANode: &n1}}, `PIN_POLICY = "CORE"`, "NODE_AFFINITY"},
	}
	for _, tc := range cases {
		tmpl := Spec{Name: "vm", Host: HostInfo{ID: 4}, GPUs: tc.gpus, Sizing: sz}.Template()
		for _, want := range []string{tc.want, `PCI = [ SHORT_ADDRESS = "41:00.0" ]`, `SCHED_REQUIREMENTS = "ID = 4"`, `VCPU = "16"`, `MEMORY = "65536"`,
			`DISK = [ IMAGE = "ubuntu-gpu", SIZE = "102400" ]`, `NIC = [ NETWORK = "private" ]`, `SSH_PUBLIC_KEY = "ssh-ed25519 AAAA x"`} {
			if !strings.Contains(tmpl, want) {
				t.Errorf("%s: template lacks %s:\n%s", tc.name, want, tmpl)
			}
		}
		if strings.Contains(tmpl, tc.not) {
			t.Errorf("%s: template has %s:\n%s", tc.name, tc.not, tmpl)
		}
	}
}

func TestClientFailuresAndCleanup(t *testing.T) {
	srv, c := fake(t, &onetest.Server{Hosts: twoHosts(), FailCreateOn: map[int]string{1: "Cannot allocate PCI device 41:00.0"}, StuckOn: map[int]bool{0: true}})
	ctx := context.Background()
	w := Waits{Boot: 300 * time.Millisecond, Cleanup: time.Second, Poll: 10 * time.Millisecond}
	pool, _ := c.HostPool(ctx)
	if _, err := c.Create(ctx, Spec{Name: "x", Host: pool[1], GPUs: pool[1].GPUs, Sizing: Sizing{TemplateID: 3}}); err == nil || !strings.Contains(err.Error(), "Cannot allocate PCI") {
		t.Fatalf("want the instantiate refusal, got %v", err)
	}
	// Both NODE_AFFINITY and PIN_POLICY: the fake refuses as OpenNebula does; gpuvet never sends it.
	if _, err := c.Allocate(ctx, "NAME = \"x\"\nTOPOLOGY = [ NODE_AFFINITY = \"0\", PIN_POLICY = \"CORE\" ]\n"); err == nil || !strings.Contains(err.Error(), "PIN_POLICY") {
		t.Fatalf("want the topology refusal, got %v", err)
	}
	id, err := c.Create(ctx, Spec{Name: "stuck", Host: pool[0], GPUs: pool[0].GPUs[:1], Sizing: Sizing{TemplateID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRunning(ctx, id, w); err == nil || !strings.Contains(err.Error(), "stuck in ACTIVE/BOOT") {
		t.Fatalf("want stuck in BOOT, got %v", err)
	}
	if err := c.Destroy(ctx, id, w); err != nil {
		t.Fatal(err)
	}
	if err := c.Destroy(ctx, id, w); err != nil { // twice is fine
		t.Fatalf("second destroy: %v", err)
	}
	// A VM that ignores terminate is removed by recover delete.
	srv.IgnoreTerminate = true
	id2, _ := c.Create(ctx, Spec{Name: "sticky", Host: pool[0], GPUs: pool[0].GPUs[1:], Sizing: Sizing{TemplateID: 3}})
	if err := c.Destroy(ctx, id2, Waits{Cleanup: 50 * time.Millisecond, Poll: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if live := srv.Live(); len(live) != 0 {
		t.Fatalf("left: %+v", live)
	}
	bad, _ := NewClient(srv.URL, "oneadmin:wrong")
	_, err = bad.HostPool(ctx)
	if err == nil || !strings.Contains(err.Error(), "authenticated") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("want an auth error without the secret, got %v", err)
	}
}

func TestCredentials(t *testing.T) {
	t.Setenv("T_ONE", "u:p")
	if v, err := Credentials("T_ONE"); err != nil || v != "u:p" {
		t.Fatalf("%q %v", v, err)
	}
	f := filepath.Join(t.TempDir(), "one_auth")
	os.WriteFile(f, []byte("u2:p2\n"), 0o600)
	t.Setenv("T_ONE", f)
	if v, err := Credentials("T_ONE"); err != nil || v != "u2:p2" {
		t.Fatalf("%q %v", v, err)
	}
	t.Setenv("T_ONE", "")
	if _, err := Credentials("T_ONE"); err == nil || !strings.Contains(err.Error(), "T_ONE") {
		t.Fatalf("want a missing-credentials error, got %v", err)
	}
}

// vmLab is 2 hosts × 2 GPUs where each VM is played by an SSH test server on its own loopback
// address (127.0.0.N, one port for all, as VMs share port 22).
type vmLab struct {
	one     *onetest.Server
	client  *Client
	servers map[string]*sshtest.Server // by IP
	key     string
	port    int
	dir     string
}

func newVMLab(t *testing.T, s *onetest.Server) *vmLab {
	t.Helper()
	dir := t.TempDir()
	lab := &vmLab{servers: map[string]*sshtest.Server{}, key: filepath.Join(dir, "id_ed25519"), dir: dir}
	pub, err := sshtest.NewKey(lab.key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	lab.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for i := 2; i < 6; i++ {
		ip := fmt.Sprintf("127.0.0.%d", i)
		vmDir := filepath.Join(dir, "vm-"+ip)
		os.Mkdir(vmDir, 0o755)
		srv, err := sshtest.StartAt(fmt.Sprintf("%s:%d", ip, lab.port), vmDir, pub)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		lab.servers[ip] = srv
	}
	var mu sync.Mutex
	next := 2
	s.IPFor = func(string, int) string {
		mu.Lock()
		defer mu.Unlock()
		ip := fmt.Sprintf("127.0.0.%d", next)
		next++
		return ip
	}
	lab.one, lab.client = fake(t, s)
	return lab
}

func (lab *vmLab) hosts(t *testing.T, m *fleet.Manifest, perGPU bool) ([]*VMHost, Plan) {
	pool, err := lab.client.HostPool(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(lab.dir, "vmroot"), 0o755)
	bin := filepath.Join(lab.dir, "gpuvet")
	os.WriteFile(bin, []byte(sshtest.FakeGpuvet), 0o755)
	p := PlanVMs(pool, nil, perGPU, "r1", Sizing{TemplateID: 3, PinPolicy: "CORE", SSHPublicKey: "ssh-ed25519 AAAA"})
	var hs []*VMHost
	for _, spec := range p.VMs {
		h := &VMHost{Client: lab.client, Spec: spec, Manifest: m, PerGPU: perGPU,
			Waits:   Waits{Boot: 2 * time.Second, Cleanup: time.Second, Poll: 10 * time.Millisecond},
			SSH:     ssh.Target{User: "root", Port: lab.port, IdentityFiles: []string{lab.key}},
			SSHOpts: ssh.Options{KnownHosts: []string{filepath.Join(lab.dir, "vm_known_hosts")}, AcceptNew: true, AgentSocket: "/nonexistent", ConfigFile: "/nonexistent"},
		}
		h.Job = ssh.Job{Binary: bin, BinaryArch: runtime.GOARCH, Plan: []byte("{}\n"), RunID: "r1", RemoteDir: filepath.Join(lab.dir, "vmroot", spec.Name), LocalOut: filepath.Join(lab.dir, "out", spec.Name)}
		hs = append(hs, h)
	}
	return hs, p
}

func TestVMPerGPUOverTwoHosts(t *testing.T) {
	lab := newVMLab(t, &onetest.Server{Hosts: twoHosts()})
	m, err := fleet.NewManifest(t.TempDir(), "opennebula", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	hs, plan := lab.hosts(t, m, true)
	var fh []fleet.Host
	for _, h := range hs {
		fh = append(fh, h)
	}
	outs := fleet.Run(context.Background(), fh, fleet.Options{Parallel: 2})
	for _, o := range outs {
		if o.Err != nil || o.CleanErr != nil {
			t.Fatalf("%s: %v / cleanup %v", o.Host, o.Err, o.CleanErr)
		}
	}
	s := fleet.Merge(&results.Summary{SchemaVersion: results.SchemaVersion}, outs, plan.Skipped, 2)
	(&Fleet{hosts: hs}).Finish(s)
	if len(s.Hosts) != 2 || s.Hosts[0].Name != "node1" || len(s.Hosts[0].Discovery.GPUs) != 2 || s.Hosts[0].Discovery.GPUs[1].Index != 1 {
		t.Fatalf("combined hosts %+v", s.Hosts)
	}
	if eps := s.Hosts[1].Models[0].Endpoints; len(eps) != 2 || eps[1].GPUs[0] != 1 {
		t.Fatalf("endpoints not on the host's GPU indexes: %+v", eps)
	}
	vms := s.Hosts[0].VMs
	if len(vms) != 2 || vms[0].NUMANode == nil || *vms[1].NUMANode != 1 || !vms[0].Terminated || vms[0].ProvisionS <= 0 || vms[1].PCI[0] != "c1:00.0" {
		t.Fatalf("node1 VMs %+v", vms)
	}
	if v := s.Hosts[1].VMs[0]; v.NUMANode != nil || v.PinPolicy != "CORE" {
		t.Fatalf("node2 (no NUMA reported) %+v", v)
	}
	for _, v := range lab.one.VMs() {
		if !strings.Contains(v.Template, "SHORT_ADDRESS") || (v.HostID == 0 && !strings.Contains(v.Template, "NODE_AFFINITY")) {
			t.Fatalf("VM %s template:\n%s", v.Name, v.Template)
		}
	}
	if live := lab.one.Live(); len(live) != 0 || len(lab.one.VMs()) != 4 {
		t.Fatalf("VMs left %+v (of %d)", live, len(lab.one.VMs()))
	}
	for ip, srv := range lab.servers {
		if f := srv.Files(); len(f) != 0 {
			t.Fatalf("left in VM %s: %v", ip, f)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(lab.dir, "vmroot")); len(left) != 0 {
		t.Fatalf("left in the VMs' run folders: %v", left)
	}
	if live := m.Live(); len(live) != 0 {
		t.Fatalf("manifest still lists %v", live)
	}
}

func TestVMFailuresAreRecordedNotFatal(t *testing.T) {
	lab := newVMLab(t, &onetest.Server{Hosts: twoHosts(), FailCreateOn: map[int]string{1: "Cannot allocate PCI device"}})
	hs, _ := lab.hosts(t, nil, false)
	var fh []fleet.Host
	for _, h := range hs {
		fh = append(fh, h)
	}
	outs := fleet.Run(context.Background(), fh, fleet.Options{Parallel: 2})
	if outs[0].Err != nil || outs[0].Summary == nil {
		t.Fatalf("node1 should pass: %v", outs[0].Err)
	}
	if outs[1].Err == nil || outs[1].Phase != fleet.PhaseProvision || !strings.Contains(outs[1].Err.Error(), "Cannot allocate PCI") {
		t.Fatalf("node2 should fail in provision: %+v", outs[1])
	}
	if live := lab.one.Live(); len(live) != 0 {
		t.Fatalf("VMs left %+v", live)
	}
}

func TestCleanFindsVMsByName(t *testing.T) {
	lab := newVMLab(t, &onetest.Server{Hosts: twoHosts(), StuckOn: map[int]bool{0: true, 1: true}})
	ctx := context.Background()
	pool, _ := lab.client.HostPool(ctx)
	spec := PlanVMs(pool, nil, false, "killed", Sizing{TemplateID: 1}).VMs[0]
	if _, err := lab.client.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	o := fleet.Object{Kind: ObjectKind, Name: spec.Name, Host: lab.client.Endpoint()}
	w := Waits{Cleanup: time.Second, Poll: 10 * time.Millisecond}
	if err := Clean(ctx, lab.client, o, w); err != nil {
		t.Fatal(err)
	}
	if err := Clean(ctx, lab.client, o, w); err != nil {
		t.Fatalf("twice: %v", err)
	}
	if live := lab.one.Live(); len(live) != 0 {
		t.Fatalf("VMs left %+v", live)
	}
}

func FuzzParseHostPool(f *testing.F) {
	f.Add([]byte(`<HOST_POOL><HOST><ID>1</ID><NAME>n</NAME><STATE>2</STATE><HOST_SHARE><PCI_DEVICES><PCI><SHORT_ADDRESS>41:00.0</SHORT_ADDRESS><VENDOR>10de</VENDOR><CLASS>0302</CLASS><NUMA_NODE>1</NUMA_NODE><VMID>-1</VMID></PCI></PCI_DEVICES></HOST_SHARE></HOST></HOST_POOL>`))
	f.Add([]byte(`<VM><ID>3</ID><STATE>3</STATE><LCM_STATE>36</LCM_STATE><USER_TEMPLATE><ERROR>boom</ERROR></USER_TEMPLATE></VM>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if hosts, err := ParseHostPool(b); err == nil {
			for _, h := range hosts {
				for _, g := range h.GPUs {
					if g.ShortAddress == "" || (g.NUMANode != nil && *g.NUMANode < 0) {
						t.Fatalf("bad GPU %+v", g)
					}
				}
			}
		}
		if v, err := ParseVM(b); err == nil {
			_, _ = v.Phase()
			_ = v.Where()
		}
		_, _ = ParseVMPool(b)
	})
}

// Issue 30: a VM's cleanup limit covers terminate and recover-delete, each up to
// opennebula.cleanup_timeout; pin_policy in OpenNebula's lower case is written as OpenNebula spells it.
func TestCleanupLimitAndPinPolicySpelling(t *testing.T) {
	f := &Fleet{Config: config.OpenNebula{CleanupTimeout: config.Duration(5 * time.Minute)}}
	if got := f.CleanupTimeout(); got < 10*time.Minute {
		t.Fatalf("cleanup limit %s cuts opennebula.cleanup_timeout=5m short", got)
	}
	tmpl := Spec{Name: "v", GPUs: []GPU{{ShortAddress: "41:00.0"}}, Sizing: Sizing{PinPolicy: "thread"}}.Template()
	if !strings.Contains(tmpl, `PIN_POLICY = "THREAD"`) {
		t.Fatalf("template:\n%s", tmpl)
	}
}
