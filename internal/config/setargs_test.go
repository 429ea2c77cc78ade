package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A GPU's accelerators entry changes its load profile; a run elsewhere that gets the plan and
// SetArgs' arguments (a Kubernetes node's load Job) must load with exactly that profile, and a
// command-line value the entry does not win over stays.
func TestSetArgsCarryAnAcceleratorsLoad(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.yaml")
	yaml := `load:
  rates: 3
  output_tokens: 128
accelerators:
  H200:
    load:
      rates: 8
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
	if acc != "H200" {
		t.Fatalf("accelerators entry %q", acc)
	}
	args, err := SetArgs(p.Config, resolved, "load")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{"load.rates=8", "load.max_duration=45s", "load.prompt_tokens=256", "load.warmup=5s"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %s", joined, want)
		}
	}
	if strings.Contains(joined, "output_tokens") || strings.Contains(joined, "engine") {
		t.Errorf("args %q carry what the entry did not change", joined)
	}
	var sets []string
	for i := 1; i < len(args); i += 2 {
		sets = append(sets, args[i])
	}
	again, err := Load(Options{Files: []string{f}, Sets: append([]string{"load.seed=3"}, sets...)})
	if err != nil {
		t.Fatalf("the arguments do not load back: %v (%q)", err, joined)
	}
	if !reflect.DeepEqual(again.Config.Load, resolved.Load) {
		t.Errorf("loaded back:\n%+v\nwant the GPU's:\n%+v", again.Config.Load, resolved.Load)
	}
	// Lists and maps (the engine section's) go in flow form and read back the same.
	eargs, err := SetArgs(p.Config, resolved, "engine")
	if err != nil {
		t.Fatal(err)
	}
	var esets []string
	for i := 1; i < len(eargs); i += 2 {
		esets = append(esets, eargs[i])
	}
	if eng, err := Load(Options{Files: []string{f}, Sets: esets}); err != nil || !reflect.DeepEqual(eng.Config.Engine, resolved.Engine) {
		t.Errorf("engine arguments %q: %v\n%+v\nwant\n%+v", eargs, err, eng.Config.Engine, resolved.Engine)
	}
	if none, _ := SetArgs(p.Config, p.Config, "load"); len(none) != 0 {
		t.Errorf("no change gives %q", none)
	}
}

// SetArgs runs once per engine of a Kubernetes run (8,000 at 1,000 nodes × 8 GPUs): marshalling the
// whole Config took 10 ms a call, the load section alone about a twentieth of that.
func BenchmarkSetArgs(b *testing.B) {
	p, err := Load(Options{Sets: []string{"backend=sim"}})
	if err != nil {
		b.Fatal(err)
	}
	c := p.Config
	c.Load.Rates++
	for b.Loop() {
		if _, err := SetArgs(p.Config, c, "load"); err != nil {
			b.Fatal(err)
		}
	}
}
