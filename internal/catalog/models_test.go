package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModelsComplete(t *testing.T) {
	for _, id := range []string{"Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen2.5-3B-Instruct",
		"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"} {
		m, ok := Builtin().LookupModel(id)
		if !ok {
			t.Fatalf("%s missing", id)
		}
		if err := validModel(m); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for _, g := range Builtin().GPUs() {
		if err := validGPU(g); err != nil {
			t.Errorf("built-in GPU %s: %v", g.Key, err)
		}
	}
}

func TestParseFileErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown field", "models:\n  - id: a/b\n    layerz: 3\n", "layerz"},
		{"zero layers", "models:\n  - id: a/b\n    params: 1e9\n    layers: 0\n", "models[0]: layers: must be > 0"},
		{"no id", "models:\n  - params: 1\n", "models[0]: id: missing"},
		{"gpu no hbm", "gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n", "gpus[0]: hbm_gbps: must be > 0"},
		{"gpu bad pcie", "gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n    hbm_gbps: 100\n    pcie_gen: 9\n", "pcie_gen"},
		{"gpu mfu > 1", "gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n    hbm_gbps: 100\n    mfu: 60\n", "mfu"},
		{"wrong type", "models:\n  - id: a/b\n    layers: many\n", "many"},
		{"gpu negative link", "gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n    hbm_gbps: 100\n    peer_link: {kind: NVLink, gbps: -1}\n", "peer_link.gbps"},
		{"gpu negative sms", "gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n    hbm_gbps: 100\n    sms: -4\n", "sms"},
		{"empty", "", "empty file"},
	}
	for _, c := range cases {
		_, err := ParseFile([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
}

func TestLoadFileAddsAndReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cat.yaml")
	body := `gpus:
  - key: H100
    names: ["NVIDIA H100 80GB HBM3"]
    architecture: Hopper
    memory_gib: 80
    bf16_tflops: 900
    hbm_gbps: 3000
models:
  - id: acme/tiny-1B
    params: 1.1e9
    layers: 22
    hidden: 2048
    heads: 32
    kv_heads: 4
    head_dim: 64
    vocab: 32000
    max_context: 2048
    dtype_bytes: 2
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	base := Builtin()
	n := len(base.GPUs())
	cat, err := LoadFile(base, path)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := cat.LookupGPU("H100"); g.BF16TFLOPS != 900 || len(cat.GPUs()) != n || cat.GPUKeys()[2] != "H100" {
		t.Errorf("H100 not replaced in place: %+v (%d GPUs, was %d; keys %v)", g, len(cat.GPUs()), n, cat.GPUKeys())
	}
	if m, ok := cat.LookupModel("acme/tiny-1B"); !ok || m.KVBytesPerToken() != 2*22*4*64*2 {
		t.Errorf("model not added: %+v", m)
	}
	// The base catalog is a value: loading a file over it leaves it (and the built-in) as it was.
	if g, _ := base.LookupGPU("H100"); g.BF16TFLOPS != 989.4 {
		t.Errorf("built-in H100 changed by LoadFile: %+v", g)
	}
	if _, ok := Builtin().LookupModel("acme/tiny-1B"); ok {
		t.Error("built-in catalog gained the file's model")
	}
	var nilCat *Catalog
	if g, ok := nilCat.LookupGPU("H100"); !ok || g.BF16TFLOPS != 989.4 {
		t.Errorf("a nil catalog is the built-in one: %+v %v", g, ok)
	}
	if _, err := LoadFile(base, filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("missing file should fail")
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte("models:\n  - id: a/b\n    params: 1e9\n"))
	f.Add([]byte("gpus:\n  - key: X\n    names: [a]\n"))
	f.Add([]byte("{]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseFile(b)
		if err == nil {
			for _, m := range file.Models {
				if m.Layers <= 0 || m.Params <= 0 {
					t.Fatalf("accepted invalid model %+v", m)
				}
			}
		}
	})
}

// A GPU without a peer link talks over PCIe at its generation; one with NVLink uses it.
func TestTPLink(t *testing.T) {
	h, _ := Builtin().LookupGPU("H100")
	if l := h.TPLink(); l.GBps != 450 || !strings.Contains(l.Kind, "NVLink") {
		t.Errorf("H100 link %+v", l)
	}
	l40, _ := Builtin().LookupGPU("L40S")
	if l := l40.TPLink(); l.Kind != "PCIe Gen4 x16" || l.GBps < 20 || l.GBps > 32 {
		t.Errorf("L40S link %+v, want PCIe Gen4 x16 at ~25 GB/s", l)
	}
	f, err := ParseFile([]byte("gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n    hbm_gbps: 100\n    peer_link: {kind: NVLink5, gbps: 900, latency_us: 9}\n    sms: 100\n"))
	if err != nil || f.GPUs[0].TPLink().GBps != 900 || f.GPUs[0].SMs != 100 {
		t.Fatalf("peer_link from a catalog file: %v %+v", err, f)
	}
}

// TestLookupGPUWholeWords: the fuzzy match takes a key only as whole words of the name: an L40 is
// no L4 and a GH200 no H200 (their datasheets differ: an L40 would be measured against an L4's
// peaks, a GH200's HBM against an H200's), while "NVIDIA H200 NVL 141GB" and a name with the key's
// words joined by "-" still find their GPU.
func TestLookupGPUWholeWords(t *testing.T) {
	cat := Builtin()
	for name, want := range map[string]string{
		"NVIDIA L40":                "",
		"NVIDIA GH200 480GB":        "",
		"NVIDIA L4 24GB":            "L4",
		"NVIDIA H200 NVL 141GB":     "H200-NVL",
		"NVIDIA H100-PCIe-80GB":     "H100-PCIE",
		"NVIDIA H100 NVL":           "H100",
		"NVIDIA A100-SXM4-80GB MIG": "A100",
	} {
		g, ok := cat.LookupGPU(name)
		if ok != (want != "") || g.Key != want {
			t.Errorf("LookupGPU(%q) = %q, %v; want %q", name, g.Key, ok, want)
		}
	}
}

// TestParseFileRefusesNonFinite: YAML's .inf and .nan are numbers to the decoder; a catalog figure
// must be finite (a NaN mfu or an infinite HBM bandwidth passed every check and came out of the
// simulator and the speed-of-light as NaN or zero).
func TestParseFileRefusesNonFinite(t *testing.T) {
	gpu := "gpus:\n  - key: X\n    names: [\"NVIDIA X\"]\n    memory_gib: 10\n    bf16_tflops: 100\n    hbm_gbps: 100\n"
	for _, bad := range []string{
		gpu + "    mfu: .nan\n",
		gpu + "    tdp_w: .inf\n",
		strings.Replace(gpu, "hbm_gbps: 100", "hbm_gbps: .inf", 1),
		"models:\n  - {id: a/b, params: .inf, layers: 1, hidden: 1, heads: 1, kv_heads: 1, head_dim: 1, vocab: 1, max_context: 1, dtype_bytes: 2}\n",
	} {
		if _, err := ParseFile([]byte(bad)); err == nil || !strings.Contains(err.Error(), "finite") {
			t.Errorf("%q: got %v, want an error saying the figure must be finite", bad, err)
		}
	}
}
