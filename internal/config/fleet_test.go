package config

import (
	"strings"
	"testing"
)

// Issue 30, items 5, 10, 12: OpenNebula's own spelling of a pin policy, credentials in the
// OpenNebula endpoint recorded nowhere, and the simulator's short defaults for hosts that run it.
func TestFleetSettings(t *testing.T) {
	p, err := Load(Options{Sets: []string{"backend=opennebula", "opennebula.endpoint=http://u:pw-secret@front:2633/RPC2",
		"opennebula.template_id=3", "opennebula.pin_policy=thread", "ssh.remote_backend=sim"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Config.OpenNebula.Endpoint != "http://front:2633/RPC2" || p.OpenNebulaEndpoint != "http://u:pw-secret@front:2633/RPC2" {
		t.Fatalf("endpoint %q, dial %q", p.Config.OpenNebula.Endpoint, p.OpenNebulaEndpoint)
	}
	for k, v := range p.Settings() {
		if strings.Contains(v, "pw-secret") {
			t.Fatalf("settings %s = %s", k, v)
		}
	}
	if src := p.Source("load.max_duration"); src != "default(sim)" {
		t.Fatalf("ssh.remote_backend=sim: load.max_duration from %q, want the simulator's short default", src)
	}
	if _, err := Load(Options{Sets: []string{"opennebula.pin_policy=sideways"}}); err == nil || !strings.Contains(err.Error(), "opennebula.pin_policy") {
		t.Fatalf("a bad pin policy: %v", err)
	}
	p, err = Load(Options{Sets: []string{"backend=ssh", "ssh.hosts=[a]"}})
	if err != nil {
		t.Fatal(err)
	}
	if src := p.Source("load.max_duration"); src != "default" {
		t.Fatalf("ssh.remote_backend=local: load.max_duration from %q", src)
	}
}
