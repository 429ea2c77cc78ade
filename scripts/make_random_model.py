#!/usr/bin/env python3
"""Write a local model folder with random weights in Qwen3's real architecture, so engines can serve it
with HF_HUB_OFFLINE=1 and no download.

  python3 scripts/make_random_model.py --size 0.6B --out /models/qwen3-0.6b-random [--device cuda]
  python3 scripts/make_random_model.py --size 8B --dry-run     # config and parameter count only

The folder holds config.json (Qwen3ForCausalLM, the published Qwen3-0.6B / Qwen3-8B shapes),
generation_config.json, model.safetensors (random BF16 weights), and a tokenizer built here with the
`tokenizers` library: a byte-level BPE whose vocabulary fills the model's whole embedding table
(151,936 ids: 256 byte tokens; gpuvet's common English words whole, with and without a leading space;
merges of printable byte pairs and triples; Qwen's chat special tokens at the top), with a ChatML chat
template in tokenizer_config.json. Every id the model can emit decodes.

--dry-run needs only Python: it prints the config and the parameter count as JSON (CI checks them
against gpuvet's model catalog). Writing the folder needs torch, transformers and tokenizers.
"""

import argparse
import json
import os
import sys

# The published configs (config.json of Qwen/Qwen3-0.6B and Qwen/Qwen3-8B on the hub).
CONFIGS = {
    "0.6B": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "8B": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}
COMMON = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936,
              max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu",
              attention_bias=False, attention_dropout=0.0, initializer_range=0.02, use_cache=True,
              use_sliding_window=False, sliding_window=None, max_window_layers=28, rope_scaling=None,
              torch_dtype="bfloat16", bos_token_id=151643, eos_token_id=151645)
# Qwen's special tokens, at Qwen's ids (the model's vocabulary ends with them).
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
            "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
            "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
            "<tool_response>", "</tool_response>", "<think>", "</think>"]
FIRST_SPECIAL = 151643
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def config(size):
    c = dict(COMMON)
    c.update(CONFIGS[size])
    c["max_window_layers"] = c["num_hidden_layers"]
    return c


def param_count(c):
    """Parameters of a Qwen3ForCausalLM with config c (embeddings and the LM head included)."""
    h, i, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + 2 * hd  # q,k,v,o; gate,up,down; 2 norms; q/k norms
    emb = c["vocab_size"] * h
    return emb + c["num_hidden_layers"] * layer + h + (0 if c["tie_word_embeddings"] else emb)


def common_words(path):
    """Lower-case words quoted in gpuvet's word list (internal/dataset/words.go)."""
    import re
    with open(path) as f:
        return sorted(set(re.findall(r'"([a-z]+)"', f.read())))


def build_tokenizer(vocab_size, words):
    """A byte-level BPE filling ids [0, FIRST_SPECIAL) with bytes and merges, specials above. The
    words come first, whole, with and without a leading space (as every real BPE holds common words),
    so prompts of an exact token length can be built from them; byte pairs and triples fill the rest."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()  # the 256 printable stand-ins for bytes
    printable = sorted(ByteLevel.alphabet())
    # Common first: letters, the space stand-in (Ġ), digits, then the rest.
    order = [ch for ch in "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZĠ0123456789.,'-"] + \
            [ch for ch in printable if ch not in "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZĠ0123456789.,'-"]
    vocab = {ch: n for n, ch in enumerate(sorted(alphabet))}
    merges = []
    want = FIRST_SPECIAL
    # Only the space-led forms: their merges all start with Ġ (ByteLevel's stand-in for the space
    # byte) and rank before every other merge, so BPE builds each word left to right, whole.
    for w in words:
        for piece in ("\u0120" + w,):
            for k in range(2, len(piece) + 1):
                if piece[:k] not in vocab:
                    vocab[piece[:k]] = len(vocab)
                    merges.append((piece[:k - 1], piece[k - 1]))
    pairs = ((a, b) for a in order for b in order)
    for a, b in pairs:
        if len(vocab) >= want:
            break
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append((a, b))
    if len(vocab) < want:
        twos = [a + b for a, b in merges]
        for ab in twos:
            for c in order:
                if len(vocab) >= want:
                    break
                if ab + c not in vocab:
                    vocab[ab + c] = len(vocab)
                    merges.append((ab, c))
            if len(vocab) >= want:
                break
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    # Pad the table to the model's vocabulary with reserved specials, as Qwen's own config does.
    n = tok.get_vocab_size()
    if n < vocab_size:
        tok.add_special_tokens([f"<|reserved_{k}|>" for k in range(vocab_size - n)])
    return tok


def write(size, out, device, seed, words):
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3Config
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # transformers 5 may name it TokenizersBackend only
        from transformers import TokenizersBackend as PreTrainedTokenizerFast

    c = config(size)
    os.makedirs(out, exist_ok=True)
    tok = build_tokenizer(c["vocab_size"], words)
    split = [w for w in words if len(tok.encode(" " + w).ids) != 1]
    if split:
        sys.exit(f"tokenizer: {len(split)} of {len(words)} words are not one token after a space, e.g. {split[:5]}")
    if tok.token_to_id("<|im_end|>") != c["eos_token_id"] or tok.token_to_id("<|endoftext|>") != c["bos_token_id"]:
        sys.exit("tokenizer: special token ids do not match the config")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None, model_max_length=c["max_position_embeddings"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    cfg = Qwen3Config(**{k: v for k, v in c.items() if k not in ("model_type", "torch_dtype")})
    cfg.architectures = c["architectures"]
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    model.generation_config = GenerationConfig(bos_token_id=c["bos_token_id"], eos_token_id=c["eos_token_id"],
                                               pad_token_id=c["bos_token_id"], do_sample=False)
    model.save_pretrained(out, safe_serialization=True)
    print(json.dumps({"out": out, "size": size, "params": n, "expected_params": param_count(c),
                      "tokenizer_vocab": tok.get_vocab_size()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--out", help="the model folder to write")
    ap.add_argument("--device", default="cpu", help="where to initialise the weights (cuda is much faster for 8B)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="print config and parameter count, write nothing")
    ap.add_argument("--words", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "internal", "dataset", "words.go"),
                    help="gpuvet's common-word list (internal/dataset/words.go): whole tokens in the vocabulary")
    a = ap.parse_args()
    c = config(a.size)
    if a.dry_run:
        print(json.dumps({"size": a.size, "params": param_count(c), "config": c}, sort_keys=True))
        return
    if not a.out:
        ap.error("--out: the folder to write (or --dry-run)")
    write(a.size, a.out, a.device, a.seed, common_words(a.words))


if __name__ == "__main__":
    main()
