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
