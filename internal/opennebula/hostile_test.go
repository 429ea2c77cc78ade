package opennebula

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula/onetest"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

// A GPU whose PCI monitoring lacks a readable VMID may be a VM's: it is an error naming the field,
// never a free GPU (a VM would be asked for it, and a bare-metal release would not see the VM).
func TestHostPoolGPUWithoutVMIDIsAnError(t *testing.T) {
	for _, vmid := range []string{"", "<VMID></VMID>", "<VMID>n/a</VMID>"} {
		doc := `<HOST_POOL><HOST><ID>1</ID><NAME>n1</NAME><STATE>2</STATE><HOST_SHARE><PCI_DEVICES><PCI><SHORT_ADDRESS>41:00.0</SHORT_ADDRESS><VENDOR>10de</VENDOR><CLASS>0302</CLASS>` + vmid + `</PCI></PCI_DEVICES></HOST_SHARE></HOST></HOST_POOL>`
		pool, err := ParseHostPool([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "VMID") {
			t.Errorf("VMID %q: %+v, %v", vmid, pool, err)
		}
	}
}

// A credentials variable that is neither user:password nor a file: the error never prints its value.
func TestCredentialsErrorHidesTheValue(t *testing.T) {
	t.Setenv("GPUVET_TEST_AUTH", "s3cr3t-pass")
	_, err := Credentials("GPUVET_TEST_AUTH")
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error: %v", err)
	}
}

// Every call is bounded by its context: a front-end that takes the request and never answers
// (an overloaded oned) does not hold a run's provisioning, or its interrupt, forever.
func TestCallBoundedByContext(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	c, err := NewClient(srv.URL, "u:p")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c.HostPool(ctx); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("no answer, no error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a call to a front-end that never answers ignored its context")
	}
}

// An answer past its bound is cut there, with an error naming it: the XML-RPC library reads an
// answer whole into memory. An answer of exactly the bound is read.
func TestCallAnswerBounded(t *testing.T) {
	defer func(l int64) { answerLimit = l }(answerLimit)
	answerLimit = 64 << 10
	head := `<?xml version="1.0"?><methodResponse><params><param><value><array><data><value><boolean>1</boolean></value><value><string>&lt;HOST_POOL&gt;`
	tail := `&lt;/HOST_POOL&gt;</string></value></data></array></value></param></params></methodResponse>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("n") == "exact" { // padded with blanks to the bound's last byte
			io.WriteString(w, head+strings.Repeat(" ", int(answerLimit)-len(head)-len(tail))+tail)
			return
		}
		// Ten times the bound (a test without the bound fails, not runs out of memory).
		io.WriteString(w, head+strings.Repeat("&lt;HOST&gt;&lt;ID&gt;1&lt;/ID&gt;&lt;/HOST&gt;", int(answerLimit)/4)+tail)
	}))
	defer srv.Close()
	for _, c := range []struct{ query, wantErr string }{{"", "one.hostpool.info: its answer is over 64 KiB"}, {"?n=exact", ""}} {
		cl, err := NewClient(srv.URL+"/RPC2"+c.query, "u:p")
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.call(context.Background(), "one.hostpool.info")
		cl.Close()
		if (err == nil) != (c.wantErr == "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("answer %q: error %v, want %q", c.query, err, c.wantErr)
		}
	}
}

// `gpuvet clean` has no deadline of its own: a front-end that takes the request and never answers
// holds a VM's removal only as long as a run's cleanup would wait (here shortened).
func TestRemoveVMBounded(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	plan, err := config.Load(config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan.Config.OpenNebula.Endpoint, plan.OpenNebulaEndpoint = srv.URL, srv.URL
	plan.Config.OpenNebula.AuthEnv = "GPUVET_TEST_ONE_AUTH"
	t.Setenv("GPUVET_TEST_ONE_AUTH", "u:p")
	m, err := fleet.NewManifest(t.TempDir(), "opennebula", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { removeTimeout = func(config.OpenNebula) time.Duration { return d } }(2 * time.Second)
	removeTimeout = func(config.OpenNebula) time.Duration { return 2 * time.Second }
	done := make(chan error, 1)
	go func() {
		done <- removeVM(context.Background(), plan, m, fleet.Object{Kind: ObjectKind, Name: "gpuvet-r1-n1", Host: srv.URL}, func(string) {})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a front-end that never answered: VM reported removed")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("removing a VM through a front-end that never answers did not end")
	}
}

// one.vm.info and one.vmpool.info answers are outside input: any bytes read without a panic.
func FuzzParseVM(f *testing.F) {
	f.Add([]byte(`<VM><ID>7</ID><NAME>gpuvet-r-n</NAME><STATE>3</STATE><LCM_STATE>3</LCM_STATE><TEMPLATE><NIC><IP>10.0.0.2</IP></NIC></TEMPLATE><HISTORY_RECORDS><HISTORY><HOSTNAME>n1</HOSTNAME></HISTORY></HISTORY_RECORDS></VM>`))
	f.Add([]byte(`<VM_POOL><VM><ID>1</ID><NAME>x</NAME></VM><VM><ID>x</ID></VM></VM_POOL>`))
	f.Add([]byte("\x00<<"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := ParseVM(b); err == nil {
			_, _ = v.Phase()
			_ = v.Where()
		}
		_, _ = ParseVMPool(b)
	})
}

// A host's name is OpenNebula's, not gpuvet's: whatever it holds ("/", ".."), a VM's results go
// into one folder of out/hosts, never outside it.
func TestVMLocalOutStaysUnderHosts(t *testing.T) {
	one, client := fake(t, &onetest.Server{Hosts: []onetest.Host{{ID: 0, Name: "a/../../../escape", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0)}}}})
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	pub, err := sshtest.NewKey(key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(key+".pub", gossh.MarshalAuthorizedKey(pub), 0o600)
	plan, err := config.Load(config.Options{Sets: []string{"backend=opennebula", "opennebula.endpoint=" + one.URL, "opennebula.template_id=3",
		"ssh.identity_file=" + key}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := fleet.NewManifest(t.TempDir(), "opennebula", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	f := &Fleet{Config: plan.Config.OpenNebula, SSH: plan.Config.SSH, Client: client, Plan: plan}
	vms, _, err := f.Hosts(context.Background(), fleet.RunInfo{ID: "r1", Out: out, Plan: []byte("{}\n"), Manifest: m, Say: func(string) {}})
	if err != nil || len(vms) != 1 {
		t.Fatalf("%d VMs: %v", len(vms), err)
	}
	lo := vms[0].(*VMHost).Job.LocalOut
	if filepath.Dir(lo) != filepath.Join(out, fleet.HostsDir) {
		t.Fatalf("local out %s is not a folder of %s", lo, filepath.Join(out, fleet.HostsDir))
	}
}
