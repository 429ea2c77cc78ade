package catalog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Model is a model's architecture figures: what the simulator's roofline needs (weights to read per
// step, FLOPs per token, KV bytes per token) and what a server checks (vocabulary, context length).
type Model struct {
	ID         string  `yaml:"id"`          // Hugging Face id, e.g. "Qwen/Qwen3-8B"
	Params     float64 `yaml:"params"`      // total parameters (embeddings included)
	Layers     int     `yaml:"layers"`      // transformer blocks
	Hidden     int     `yaml:"hidden"`      // model width
	Heads      int     `yaml:"heads"`       // attention (query) heads
	KVHeads    int     `yaml:"kv_heads"`    // key/value heads (GQA)
	HeadDim    int     `yaml:"head_dim"`    // per head
	Vocab      int     `yaml:"vocab"`       // vocabulary size
	MaxContext int     `yaml:"max_context"` // max_position_embeddings: vLLM's default max_model_len
	DTypeBytes int     `yaml:"dtype_bytes"` // bytes per weight and per KV element (2: BF16)
	// TiedEmbeddings: the LM head reuses the input embedding table (config.json tie_word_embeddings).
	TiedEmbeddings bool `yaml:"tied_embeddings"`
}

// WeightBytes is the size of the weights in memory.
func (m Model) WeightBytes() float64 { return m.Params * float64(m.DTypeBytes) }

// KVBytesPerToken is the KV-cache size of one token: K and V, every layer, every KV head.
// Qwen3-8B: 2 × 36 × 8 × 128 × 2 = 147,456 bytes.
func (m Model) KVBytesPerToken() float64 {
	return float64(2 * m.Layers * m.KVHeads * m.HeadDim * m.DTypeBytes)
}

// builtinModels is the built-in model table (read through Builtin; never changed at run time). Sources: each model's config.json on the Hugging Face hub
// (num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, head_dim, vocab_size,
// max_position_embeddings, torch_dtype, tie_word_embeddings) and its model card (parameter count).
var builtinModels = []Model{
	{ID: "Qwen/Qwen3-0.6B", Params: 0.596e9, Layers: 28, Hidden: 1024, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, MaxContext: 40960, DTypeBytes: 2, TiedEmbeddings: true},
	{ID: "Qwen/Qwen3-8B", Params: 8.19e9, Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, MaxContext: 40960, DTypeBytes: 2},
	// Qwen3-14B: 40 × (attention 62.9M + MLP 3 × 5120 × 17408) + 2 × 151936 × 5120 untied = 14.77e9.
	{ID: "Qwen/Qwen3-14B", Params: 14.77e9, Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, MaxContext: 40960, DTypeBytes: 2},
	{ID: "Qwen/Qwen2.5-3B-Instruct", Params: 3.09e9, Layers: 36, Hidden: 2048, Heads: 16, KVHeads: 2, HeadDim: 128,
		Vocab: 151936, MaxContext: 32768, DTypeBytes: 2, TiedEmbeddings: true},
	{ID: "meta-llama/Llama-3.1-8B-Instruct", Params: 8.03e9, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 128256, MaxContext: 131072, DTypeBytes: 2},
	{ID: "meta-llama/Llama-3.1-70B-Instruct", Params: 70.6e9, Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		Vocab: 128256, MaxContext: 131072, DTypeBytes: 2},
}

// File is the catalog extension file: GPUs and models that add to or replace the built-in entries
// (same key / id: replaced as a whole).
//
//	gpus:
//	  - key: MYGPU
//	    names: ["NVIDIA My GPU"]
//	    memory_gib: 96
//	    bf16_tflops: 800
//	    hbm_gbps: 4000
//	models:
//	  - id: org/model
//	    params: 7e9
//	    layers: 32
//	    ...
type File struct {
	GPUs   []GPU   `yaml:"gpus"`
	Models []Model `yaml:"models"`
}

// ParseFile decodes and validates a catalog extension file. Unknown fields are errors (a typo must
// not silently leave a figure at zero).
func ParseFile(b []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty file: expected the top-level keys gpus and/or models")
		}
		return nil, fmt.Errorf("%w (expected top-level keys gpus: and models:, fields as in the built-in table)", err)
	}
	for i, g := range f.GPUs {
		if err := validGPU(g); err != nil {
			return nil, fmt.Errorf("gpus[%d]: %w", i, err)
		}
	}
	for i, m := range f.Models {
		if err := validModel(m); err != nil {
			return nil, fmt.Errorf("models[%d]: %w", i, err)
		}
	}
	return &f, nil
}

func validGPU(g GPU) error {
	if strings.TrimSpace(g.Key) == "" {
		return fmt.Errorf("key: missing (the short name users type, e.g. H100)")
	}
	if len(g.Names) == 0 {
		return fmt.Errorf("names: missing for %s (the exact nvidia-smi product name(s))", g.Key)
	}
	figures := []struct {
		field string
		v     float64
	}{{"memory_gib", g.MemoryGiB}, {"bf16_tflops", g.BF16TFLOPS}, {"hbm_gbps", g.HBMGBps}, {"fp32_tflops", g.FP32TFLOPS},
		{"tf32_tflops", g.TF32TFLOPS}, {"tdp_w", g.TDPW}, {"idle_w", g.IdleW}, {"nvlink_gbps", g.NVLinkGBps}, {"mfu", g.MFU},
		{"mbu", g.MBU}, {"step_overhead_ms", g.StepOverheadMs}, {"seq_overhead_us", g.SeqOverheadUs},
		{"peer_link.gbps", g.PeerLink.GBps}, {"peer_link.latency_us", g.PeerLink.LatencyUs}}
	for _, c := range figures {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			return fmt.Errorf("%s: must be a finite number for %s, got %v", c.field, g.Key, c.v)
		}
	}
	// The first three are required; the others may be 0 (not known, or the architecture's).
	for i, c := range figures {
		switch {
		case i < 3 && !(c.v > 0):
			return fmt.Errorf("%s: must be > 0 for %s, got %v", c.field, g.Key, c.v)
		case c.v < 0:
			return fmt.Errorf("%s: must be ≥ 0 for %s, got %v", c.field, g.Key, c.v)
		}
	}
	if g.MFU > 1 || g.MBU > 1 {
		return fmt.Errorf("mfu/mbu: efficiencies are fractions of peak in (0, 1], got mfu %v mbu %v for %s", g.MFU, g.MBU, g.Key)
	}
	if _, ok := pcieLane[g.PCIeGen]; !ok && g.PCIeGen != 0 {
		return fmt.Errorf("pcie_gen: must be 0 (not PCIe-attached) or 1–6 for %s, got %d", g.Key, g.PCIeGen)
	}
	if g.SMs < 0 {
		return fmt.Errorf("sms: must be ≥ 0 for %s, got %d", g.Key, g.SMs)
	}
	if g.PCIeWidth < 0 || g.PCIeWidth > 32 {
		return fmt.Errorf("pcie_width: must be 0–32 lanes for %s, got %d", g.Key, g.PCIeWidth)
	}
	return nil
}

func validModel(m Model) error {
	if strings.TrimSpace(m.ID) == "" {
		return fmt.Errorf("id: missing (the Hugging Face model id, e.g. Qwen/Qwen3-8B)")
	}
	if math.IsInf(m.Params, 0) {
		return fmt.Errorf("params: must be a finite number for %s, got %v", m.ID, m.Params)
	}
	if !(m.Params > 0) {
		return fmt.Errorf("params: must be > 0 for %s, got %v", m.ID, m.Params)
	}
	for _, c := range []struct {
		field string
		v     int
	}{{"layers", m.Layers}, {"hidden", m.Hidden}, {"heads", m.Heads}, {"kv_heads", m.KVHeads},
		{"head_dim", m.HeadDim}, {"vocab", m.Vocab}, {"max_context", m.MaxContext}, {"dtype_bytes", m.DTypeBytes}} {
		if c.v <= 0 {
			return fmt.Errorf("%s: must be > 0 for %s, got %d", c.field, m.ID, c.v)
		}
	}
	if m.KVHeads > m.Heads {
		return fmt.Errorf("kv_heads: %d is more than heads %d for %s", m.KVHeads, m.Heads, m.ID)
	}
	return nil
}
