package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// hfConfig is the part of a Hugging Face config.json that fixes a dense decoder's size.
type hfConfig struct {
	Layers       int    `json:"num_hidden_layers"`
	Hidden       int    `json:"hidden_size"`
	Intermediate int    `json:"intermediate_size"`
	Heads        int    `json:"num_attention_heads"`
	KVHeads      int    `json:"num_key_value_heads"`
	HeadDim      int    `json:"head_dim"`
	Vocab        int    `json:"vocab_size"`
	MaxPos       int    `json:"max_position_embeddings"`
	Tie          bool   `json:"tie_word_embeddings"`
	DType        string `json:"torch_dtype"`
	DType5       string `json:"dtype"` // transformers 5 writes dtype
	ModelType    string `json:"model_type"`
}

// ModelFromHFConfig reads a dense decoder's architecture from its config.json (Qwen2/3, Llama and
// Mistral layouts: q/k/v/o projections, a gated MLP, RMS norms) and counts its parameters from it.
// Mixture-of-experts and other layouts are refused with the reason.
func ModelFromHFConfig(id string, b []byte) (Model, error) {
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return Model{}, fmt.Errorf("config.json: %w", err)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	for _, moe := range []string{"num_experts", "num_local_experts", "n_routed_experts"} {
		if v, ok := raw[moe].(float64); ok && v > 0 {
			return Model{}, fmt.Errorf("config.json: %s=%v: mixture-of-experts models are not counted from config.json; add the model to a catalog file", moe, v)
		}
	}
	// A quantized checkpoint keeps torch_dtype at the compute dtype: its weights' bytes are in
	// quantization_config (older compressed-tensors files: compression_config).
	for _, qk := range []string{"quantization_config", "compression_config"} {
		if q, ok := raw[qk].(map[string]any); ok {
			method, _ := q["quant_method"].(string)
			return Model{}, fmt.Errorf("config.json: %s (quant_method %q): quantized weights are not counted from config.json (torch_dtype is not their size); add the model to a catalog file", qk, method)
		}
	}
	c.KVHeads = cmp.Or(c.KVHeads, c.Heads)
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"num_hidden_layers", c.Layers}, {"hidden_size", c.Hidden}, {"intermediate_size", c.Intermediate},
		{"num_attention_heads", c.Heads}, {"vocab_size", c.Vocab}, {"num_key_value_heads", c.KVHeads}, {"head_dim", c.HeadDim}} {
		if f.v <= 0 {
			return Model{}, fmt.Errorf("config.json: %s missing or not positive", f.name)
		}
	}
	dt := cmp.Or(c.DType, c.DType5)
	bytes, ok := map[string]int{"": 2, "bfloat16": 2, "float16": 2, "float32": 4}[dt]
	if !ok {
		return Model{}, fmt.Errorf("config.json: dtype %q: want bfloat16, float16 or float32", dt)
	}
	h, q, kv := float64(c.Hidden), float64(c.Heads*c.HeadDim), float64(c.KVHeads*c.HeadDim)
	layer := h*q + 2*h*kv + q*h + 3*h*float64(c.Intermediate) + 2*h
	if c.ModelType == "qwen3" {
		layer += 2 * float64(c.HeadDim) // q_norm, k_norm
	}
	emb := float64(c.Vocab) * h
	params := emb + float64(c.Layers)*layer + h
	if !c.Tie {
		params += emb
	}
	m := Model{ID: id, Params: params, Layers: c.Layers, Hidden: c.Hidden, Heads: c.Heads, KVHeads: c.KVHeads,
		HeadDim: c.HeadDim, Vocab: c.Vocab, MaxContext: c.MaxPos, DTypeBytes: bytes, TiedEmbeddings: c.Tie}
	if m.MaxContext <= 0 {
		m.MaxContext = 4096
	}
	return m, nil
}

// ResolveModel finds a model's architecture: the catalog by id, else the config.json of a local
// model folder given as the id. The note says where it came from (or why it is unknown).
func (c *Catalog) ResolveModel(id string) (Model, string, bool) {
	if m, ok := c.LookupModel(id); ok {
		return m, "catalog", true
	}
	b, err := filelimit.Read(filepath.Join(id, "config.json"), filelimit.Config, "model config.json")
	if err != nil {
		return Model{}, fmt.Sprintf("%s is not in the model catalog and is not a local folder with config.json", id), false
	}
	m, err := ModelFromHFConfig(id, b)
	if err != nil {
		return Model{}, err.Error(), false
	}
	return m, "config.json of the local folder", true
}
