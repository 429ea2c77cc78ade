package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A GPU's accelerators entry changes its load profile and engine; a run elsewhere that gets
// ResolvedYAML of that GPU's settings (a Kubernetes node's Job) loads exactly them from the one
// file, with no --set, and with a command-line value here (load.seed) that the entry does not win
// over; the entry itself is not sent again.
func TestResolvedYAMLCarriesAGPUsSettings(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.yaml")
	yaml := `load:
  rates: 3
  output_tokens: 128
accelerators:
  H200:
    load:
      rates: 8
      seed: 9
      max_duration: 45s
      prompt_tokens: 256
      warmup: "5s"
    engine:
      extra_args: ["--max-num-seqs", "48", "a,b"]
      env: {A: "1, 2", B: x}
`
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(Options{Files: []string{f}, Sets: []string{"load.seed=3"}})
	if err != nil {
		t.Fatal(err)
	}
	resolved, _, acc := p.ForGPU("NVIDIA H200")
	if acc != "H200" || resolved.Load.Rates != 8 || resolved.Load.Seed != 3 {
		t.Fatalf("accelerators entry %q, load %+v", acc, resolved.Load)
	}
	b, err := p.ResolvedYAML(resolved)
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(t.TempDir(), "resolved.yaml")
	if err := os.WriteFile(g, b, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Load(Options{Files: []string{g}})
	if err != nil {
		t.Fatalf("the resolved plan does not load back: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(again.Config.Load, resolved.Load) || !reflect.DeepEqual(again.Config.Engine, resolved.Engine) {
		t.Errorf("loaded back:\n%+v\n%+v\nwant the GPU's:\n%+v\n%+v", again.Config.Load, again.Config.Engine, resolved.Load, resolved.Engine)
	}
	// Sent again, the entry would set seed 9 over the flag's 3 on a host that sees an H200.
	if len(again.Config.Accelerators) != 0 {
		t.Errorf("the resolved plan sends accelerators again: %v", again.Config.Accelerators)
	}
	if c, _, _ := again.ForGPU("NVIDIA H200"); c.Load.Seed != 3 {
		t.Errorf("on an H200 the resolved plan loads with seed %d, want the flag's 3", c.Load.Seed)
	}
}

// ResolvedYAML runs once per distinct node settings of a Kubernetes run (the k8s backend shares
// one plan among nodes alike): it marshals and checks the whole plan, about 6 ms a call.
func BenchmarkResolvedYAML(b *testing.B) {
	p, err := Load(Options{Sets: []string{"backend=sim"}})
	if err != nil {
		b.Fatal(err)
	}
	c := p.Config
	c.Load.Rates++
	for b.Loop() {
		if _, err := p.ResolvedYAML(c); err != nil {
			b.Fatal(err)
		}
	}
}
