package opennebula

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula/onetest"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

// The bare-metal re-measure is a nested fleet run: a node that cannot be reached is a failed host
// of out/baremetal/summary.json (named as OpenNebula names it, under the run's id, judged), said,
// and left out of the baseline; with no node finished there is no baseline file and the run says
// so. Its VMs are still made (nothing was released, so nothing needs restoring). Nothing on this
// machine is touched: the node is never logged into (its key unknown, its port closed).
func TestBaremetalNodeThatFailsGivesNoBaseline(t *testing.T) {
	one, client := fake(t, &onetest.Server{Hosts: twoHosts()})
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	pub, err := sshtest.NewKey(key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(key+".pub", gossh.MarshalAuthorizedKey(pub), 0o600)
	cfg := filepath.Join(dir, "ssh_config")
	os.WriteFile(cfg, []byte("Host node1 node2\n  HostName 127.0.0.1\n  Port 1\n  User root\n"), 0o600)
	plan, err := config.Load(config.Options{Sets: []string{"backend=opennebula", "opennebula.endpoint=" + one.URL, "opennebula.template_id=3",
		"opennebula.baremetal=true", "opennebula.baremetal_set=[load.max_duration=7s]", "ssh.identity_file=" + key, "ssh.config_file=" + cfg,
		"ssh.known_hosts=" + filepath.Join(dir, "known_hosts")}})
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	m, err := fleet.NewManifest(state, "opennebula", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var mu sync.Mutex
	var said []string
	f := &Fleet{Config: plan.Config.OpenNebula, SSH: plan.Config.SSH, Client: client, Plan: plan}
	vms, _, err := f.Hosts(context.Background(), fleet.RunInfo{ID: "r1", Out: out, Plan: []byte("{}\n"), Manifest: m, ToolVersion: "v1",
		Say: func(l string) { mu.Lock(); said = append(said, l); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) == 0 {
		t.Fatal("no VM planned: a node that never started its bare-metal run has nothing to restore")
	}
	s, err := results.Read(filepath.Join(out, "baremetal", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.RunID != "r1" || s.Environment != "baremetal" || s.Backend != "ssh" || len(s.Hosts) == 0 || s.Status != results.StatusFailed {
		t.Fatalf("the nodes' summary: run %q env %q backend %q status %s hosts %+v", s.RunID, s.Environment, s.Backend, s.Status, s.Hosts)
	}
	// Recorded with the plan the nodes ran under.
	if lp := s.Meta.LoadProfile; lp == nil || time.Duration(lp.MaxDuration) != 7*time.Second {
		t.Fatalf("load profile %+v: not the nodes' (baremetal_set)", lp)
	}
	for _, h := range s.Hosts {
		if (h.Name != "node1" && h.Name != "node2") || h.Status != results.StatusFailed || !strings.Contains(h.Error, "provision failed") {
			t.Fatalf("node %s: %s %q", h.Name, h.Status, h.Error)
		}
		if !strings.Contains(strings.Join(said, "\n"), "bare-metal "+h.Name+": no baseline from this node (provision failed") {
			t.Fatalf("%s's missing baseline not said:\n%s", h.Name, strings.Join(said, "\n"))
		}
	}
	if _, err := os.Stat(filepath.Join(out, "baremetal", "baseline.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a baseline of nodes that all failed: %v", err)
	}
	fin := &results.Summary{}
	f.finishBaremetal(fin)
	if fin.Baseline != nil || !strings.Contains(strings.Join(fin.Caveats, "\n"), "no node finished its bare-metal run") {
		t.Fatalf("finish: baseline %+v caveats %q", fin.Baseline, fin.Caveats)
	}
	if ms, _ := fleet.Manifests(state, "", ""); len(ms) != 1 {
		t.Fatalf("%d manifests: the nodes' run has none of its own", len(ms))
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
}
