package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestRemoteYAMLRoundTrips(t *testing.T) {
	p, err := Load(Options{Sets: []string{"backend=ssh", "ssh.hosts=a,b", "ssh.remote_backend=sim", "load.max_duration=3s",
		"gates.ttft_p95_ms=null", "run.baseline=/here/base.json", "engine.env.FOO=bar", "models=m1,m2"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.RemoteYAML()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	q, err := Load(Options{Files: []string{f}})
	if err != nil {
		t.Fatalf("the remote plan does not load: %v\n%s", err, b)
	}
	want := p.Config
	want.Backend, want.Run.Baseline = "sim", ""
	want.SSH, want.OpenNebula = sshDefaults(), openNebulaDefaults()
	// Compared as YAML: nil and empty lists are the same plan.
	g, _ := yaml.Marshal(q.Config)
	w, _ := yaml.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("round trip differs:\n got %s\nwant %s", g, w)
	}
	if strings.Contains(string(b), "/here/base.json") {
		t.Fatal("the baseline path went to the host")
	}
}

// An accelerators entry reaches the hosts as the keys it sets: the host's plan loads, and its GPU
// gets the override (the Go struct's zero values once travelled too, and every host refused them).
func TestRemoteYAMLAccelerators(t *testing.T) {
	f := filepath.Join(t.TempDir(), "acc.yaml")
	os.WriteFile(f, []byte("accelerators:\n  H200:\n    engine:\n      extra_args: [\"--max-num-seqs\", \"48\"]\n    load:\n      max_duration: 9s\n"), 0o600)
	p, err := Load(Options{Files: []string{f}, Sets: []string{"backend=ssh", "ssh.hosts=a", "ssh.remote_backend=sim"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.RemoteYAML()
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(g, b, 0o600)
	q, err := Load(Options{Files: []string{g}})
	if err != nil {
		t.Fatalf("the remote plan does not load: %v\n%s", err, b)
	}
	c, _, key := q.ForGPU("NVIDIA H200")
	if key != "H200" || strings.Join(c.Engine.ExtraArgs, " ") != "--max-num-seqs 48" || c.Load.MaxDuration.D().String() != "9s" || c.Engine.Kind != p.Config.Engine.Kind {
		t.Errorf("on the host, NVIDIA H200 gets key %q, extra args %v, max_duration %s, kind %q", key, c.Engine.ExtraArgs, c.Load.MaxDuration.D(), c.Engine.Kind)
	}
}

func TestRemoteBackendsNeedTheirSettings(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		path string
	}{
		{[]string{"backend=ssh"}, "ssh.hosts"},
		{[]string{"backend=opennebula"}, "opennebula.endpoint"},
		{[]string{"backend=opennebula", "opennebula.endpoint=http://x:2633/RPC2"}, "opennebula.image"},
		{[]string{"opennebula.pin_policy=FAST"}, "opennebula.pin_policy"},
		{[]string{"ssh.remote_backend=k8s"}, "ssh.remote_backend"},
	} {
		_, err := Load(Options{Sets: tc.sets})
		if err == nil || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%v: want an error naming %s, got %v", tc.sets, tc.path, err)
		}
	}
}

func TestRemoteYAMLRefusesWhatTheHostsWould(t *testing.T) {
	p, err := Load(Options{Sets: []string{"backend=ssh", "ssh.hosts=a", "engine.kind=generic"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.RemoteYAML(); err == nil || !strings.Contains(err.Error(), "engine.command") || !strings.Contains(err.Error(), "on the hosts (local)") {
		t.Fatalf("want the engine.command error as the hosts would give it, got %v", err)
	}
}

// With is the plan a nested run's hosts ran under: the overrides on top, checked, the original
// untouched, the front-end's whole URL kept.
func TestPlanWith(t *testing.T) {
	p, err := Load(Options{Sets: []string{"backend=opennebula", "opennebula.endpoint=http://u:pw@fe:2633/RPC2", "opennebula.template_id=5",
		"opennebula.baremetal=true", "engine.kind=sglang"}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := p.With("environment=baremetal", "engine.kind=generic", "engine.command=srv --port {port}", "load.max_duration=7s")
	if err != nil {
		t.Fatal(err)
	}
	if q.Config.Environment != "baremetal" || q.Config.Engine.Kind != "generic" || q.Config.Load.MaxDuration.D().Seconds() != 7 || q.Source("engine.kind") != "flag:--set" {
		t.Fatalf("overrides not applied: env %q engine %q load %v source %q", q.Config.Environment, q.Config.Engine.Kind, q.Config.Load.MaxDuration, q.Source("engine.kind"))
	}
	if p.Config.Engine.Kind != "sglang" || p.Source("environment") == "flag:--set" {
		t.Fatal("With changed the original plan")
	}
	if q.OpenNebulaEndpoint != "http://u:pw@fe:2633/RPC2" || q.Config.OpenNebula.Endpoint != "http://fe:2633/RPC2" {
		t.Fatalf("endpoint: dialled %q, recorded %q", q.OpenNebulaEndpoint, q.Config.OpenNebula.Endpoint)
	}
	if _, err := p.With("engine.kind=nope"); err == nil || !strings.Contains(err.Error(), "engine.kind") {
		t.Fatalf("a bad override: %v", err)
	}
	if _, err := p.With("engine.kind"); err == nil {
		t.Fatal("an override without = was taken")
	}
}
