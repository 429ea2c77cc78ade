package catalog

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The model-making script's configs (scripts/make_random_model.py --dry-run) have the shapes of the
// catalog's Qwen3 entries, and both the script and ModelFromHFConfig count the catalog's parameters.
func TestRandomModelScriptMatchesCatalog(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the model-making script is not checked")
	}
	for size, id := range map[string]string{"0.6B": "Qwen/Qwen3-0.6B", "8B": "Qwen/Qwen3-8B"} {
		out, err := exec.Command(py, "../../scripts/make_random_model.py", "--size", size, "--dry-run").Output()
		if err != nil {
			t.Fatalf("%s: %v", size, err)
		}
		var d struct {
			Params float64         `json:"params"`
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			t.Fatalf("%s: %v: %s", size, err, out)
		}
		want, _ := Builtin().LookupModel(id)
		m, err := ModelFromHFConfig("local", d.Config)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m.Params-d.Params) > 0.5 {
			t.Errorf("%s: Go counts %.0f parameters, the script %.0f", size, m.Params, d.Params)
		}
		if math.Abs(m.Params-want.Params)/want.Params > 0.002 {
			t.Errorf("%s: %.4g parameters, catalog %s has %.4g", size, m.Params, id, want.Params)
		}
		m.ID, m.Params = want.ID, want.Params
		if m != want {
			t.Errorf("%s: shapes %+v, catalog %+v", size, m, want)
		}
	}
}

func TestResolveModelFromFolder(t *testing.T) {
	dir := t.TempDir()
	if _, note, ok := Builtin().ResolveModel(dir); ok || !strings.Contains(note, "config.json") {
		t.Errorf("empty folder: ok=%v note=%q", ok, note)
	}
	cfg := `{"model_type":"llama","num_hidden_layers":2,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,` +
		`"num_key_value_heads":2,"vocab_size":1000,"max_position_embeddings":512,"torch_dtype":"bfloat16"}`
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644)
	m, note, ok := Builtin().ResolveModel(dir)
	// 2 × (64·64 + 2·64·32 + 64·64 + 3·64·128 + 2·64) + 64 + 2 × 1000·64
	want := 2*(64*64+2*64*32+64*64+3*64*128+2*64) + 64 + 2*1000*64.0
	if !ok || m.Params != want || m.HeadDim != 16 || m.KVHeads != 2 || m.DTypeBytes != 2 {
		t.Errorf("got %+v (%s), want %v params", m, note, want)
	}
	if m, _, ok := Builtin().ResolveModel("Qwen/Qwen3-8B"); !ok || m.Layers != 36 {
		t.Errorf("catalog id: %+v", m)
	}
	for _, bad := range []string{`{"num_hidden_layers":2}`, `{`, `{"num_hidden_layers":2,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"vocab_size":10,"num_experts":8}`,
		`{"num_hidden_layers":2,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"vocab_size":10,"torch_dtype":"int4"}`} {
		if _, err := ModelFromHFConfig("x", []byte(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func FuzzModelFromHFConfig(f *testing.F) {
	f.Add([]byte(`{"num_hidden_layers":2,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,"vocab_size":10}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ModelFromHFConfig("x", b)
		if err == nil && (m.Params <= 0 || m.Layers <= 0) {
			t.Errorf("accepted %s as %+v", b, m)
		}
	})
}

// TestQuantizedConfigRefused: a quantized checkpoint (AWQ, GPTQ, FP8, compressed-tensors) keeps
// torch_dtype at bfloat16/float16 and says how its weights are stored in quantization_config: read
// as 2 bytes a weight, its roofline bound would be a half or a quarter of the real one, and a
// healthy machine's tok/s "impossible". It is refused with the reason, as mixture-of-experts is.
func TestQuantizedConfigRefused(t *testing.T) {
	base := `{"model_type":"llama","num_hidden_layers":2,"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,` +
		`"vocab_size":1000,"torch_dtype":"float16"`
	for _, q := range []string{`"quantization_config":{"quant_method":"awq","bits":4}`, `"quantization_config":{"quant_method":"fp8"}`,
		`"compression_config":{"quant_method":"compressed-tensors"}`} {
		_, err := ModelFromHFConfig("x", []byte(base+","+q+"}"))
		if err == nil || !strings.Contains(err.Error(), "quantiz") {
			t.Errorf("%s: got %v, want a refusal naming the quantization", q, err)
		}
	}
	if _, err := ModelFromHFConfig("x", []byte(base+`,"quantization_config":null}`)); err != nil {
		t.Errorf("quantization_config null: %v", err)
	}
}
