#!/usr/bin/env python3
"""gpuvet's OpenAI-compatible front over transformers' continuous-batching engine.

A thin front: every request goes straight to transformers' ContinuousBatchingManager (paged attention,
continuous batching, its own scheduler) and each token is written to the client as an SSE chunk as soon
as the engine yields it. The front has no batching or scheduling logic of its own.

Endpoints: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions (SSE with
stream=true; usage, stream_options.include_usage and continuous_usage_stats; max_tokens; ignore_eos),
POST /tokenize, GET /metrics.

What it lacks compared with vLLM's API (answered with HTTP 400 naming the parameter, never ignored):
n > 1, best_of, logprobs, echo, stop strings, tools, response_format, per-request sampling (temperature,
top_p, top_k and seed are accepted only at their greedy values: the engine samples with one
GenerationConfig for every request), and prompts given as token lists in batches (a list of prompts).

Each finished request is logged on stderr as one line, the engine's own timing:
  gpuvet-front done id=… prompt_tokens=… output_tokens=… arrive=<unix s> first=<unix s> end=<unix s>
      finish=<stop|length|error|cancelled|client_gone> max_tokens=… ignore_eos=<0|1> eos_tokens=…
(eos_tokens: EOS ids the model made that ignore_eos streamed past)
so gpuvet's client-side TTFT and output tok/s can be checked against the server's. While tokens flow,
the front also logs every 0.1 s how many output tokens it has written to streams in all (a token made
for a client that went away is not counted), with the time:
  gpuvet-front tokens at=<unix s> total=<tokens>
so the server's own token count over any window (a rung's, from summary.json) is exact, with no
assumption about how a request's tokens spread over its life.

--generator fake serves a deterministic word-level model without torch (for tests on machines with
only Python and aiohttp).
"""

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
import uuid

from aiohttp import web

LOG = logging.getLogger("gpuvet-front")


class APIError(Exception):
    def __init__(self, status, message, param=None, kind="invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.kind = status, message, param, kind


# ---------------------------------------------------------------------------------------------------
# Generators: submit(prompt_ids, max_new_tokens, ignore_eos, callback) -> request id.
# callback(new_token_ids, finished, error) is called from the engine's thread.


class TransformersGenerator:
    """transformers' ContinuousBatchingManager, one per process, started once."""

    def __init__(self, args):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        self.version = transformers.__version__
        self.lock = threading.Lock()
        self.preemptions = _count_evictions(self)
        self.tokenizer = AutoTokenizer.from_pretrained(args.model)
        t0 = time.time()
        # transformers 5 names paged attention "paged|sdpa"; 4.5x named it "sdpa_paged".
        for attn in dict.fromkeys([args.attn_implementation, "paged|sdpa", "sdpa_paged", "paged|eager"]):
            try:
                self.model = AutoModelForCausalLM.from_pretrained(
                    args.model, dtype=torch.bfloat16, attn_implementation=attn, device_map="cuda").eval()
                args.attn_implementation = attn
                break
            except ValueError as e:
                if "attn_implementation" not in str(e):
                    raise
                LOG.warning("attn_implementation=%s refused: %s", attn, str(e).splitlines()[0][:200])
        else:
            raise SystemExit("no paged attention implementation accepted by this transformers")
        LOG.warning("loaded %s in %.1f s (transformers %s, torch %s, attn %s)", args.model, time.time() - t0,
                    self.version, torch.__version__, args.attn_implementation)
        eos = self.tokenizer.eos_token_id
        self.eos = eos
        gen = GenerationConfig(max_new_tokens=args.max_model_len, do_sample=False, eos_token_id=eos,
                               pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos)
        if args.compile:
            gen.compile_config = transformers.CompileConfig(fullgraph=False)
        cb_kwargs = {}
        cbc = getattr(transformers, "ContinuousBatchingConfig", None)
        if cbc is None:
            try:
                from transformers.generation.configuration_utils import ContinuousBatchingConfig as cbc
            except ImportError:
                cbc = None
        if cbc is not None:
            fields = {}
            for name, value in (("max_memory_percent", args.gpu_memory_utilization),
                                ("max_batch_tokens", args.max_batch_tokens or None),
                                ("max_requests_per_batch", args.max_num_seqs or None),
                                ("use_cuda_graph", args.cuda_graphs),
                                ("default_compile_level", args.compile_level or None)):
                if value is not None and _accepts(cbc, name):
                    fields[name] = value
            try:
                cb_kwargs["continuous_batching_config"] = cbc(**fields)
                LOG.warning("continuous batching config: %s", fields)
            except TypeError as e:
                LOG.warning("ContinuousBatchingConfig(%s) refused (%s): using its defaults", fields, e)
                cb_kwargs["continuous_batching_config"] = cbc()
        try:
            self.manager = self.model.init_continuous_batching(generation_config=gen, **cb_kwargs)
        except TypeError as e:
            LOG.warning("init_continuous_batching(%s) refused (%s): using its defaults", list(cb_kwargs), e)
            self.manager = self.model.init_continuous_batching(generation_config=gen)
        if args.warmup and hasattr(self.manager, "warmup"):
            t0 = time.time()
            try:
                self.manager.warmup()
                LOG.warning("warm-up (CUDA graph capture) took %.1f s", time.time() - t0)
            except Exception as e:  # warm-up is an optimisation: serve without it, and say so
                LOG.warning("warm-up failed, serving without it: %s", e)
        self.manager.start()
        self.callbacks = {}  # request id -> [callback, generated tokens already taken]
        self.per_request_eos = True
        threading.Thread(target=self._dispatch, name="gpuvet-dispatch", daemon=True).start()

    def submit(self, ids, max_new_tokens, ignore_eos, callback):
        rid = "gv-" + uuid.uuid4().hex
        with self.lock:
            self.callbacks[rid] = [callback, 0]
        kwargs = {"request_id": rid, "max_new_tokens": max_new_tokens, "streaming": True}
        if ignore_eos:
            kwargs["eos_token_id"] = -1
        try:
            self.manager.add_request(list(ids), **kwargs)
        except TypeError:
            # An older manager: streaming is set for the whole manager, EOS only in GenerationConfig.
            if ignore_eos:
                with self.lock:
                    self.callbacks.pop(rid, None)
                raise APIError(400, "ignore_eos: this transformers version has no per-request EOS", "ignore_eos")
            self.manager.add_request(list(ids), request_id=rid, max_new_tokens=max_new_tokens)
        return rid

    def cancel(self, rid):
        """Cancels a request the engine has not finished. One it finished (its last output already
        taken by the dispatcher) is not cancelled: transformers would free its KV blocks a second time
        ("CacheAllocator … attempted to free blocks for non-existent request_id")."""
        with self.lock:
            open_ = self.callbacks.pop(rid, None) is not None
        if not open_:
            return False
        try:
            self.manager.cancel_request(rid)
        except Exception as e:
            LOG.warning("cancel_request(%s) failed: %s", rid, e)
        return True

    def _dispatch(self):
        while True:
            out = self.manager.get_result(timeout=0.05)
            if out is None:
                if not self.manager.is_running():
                    LOG.error("the continuous-batching thread stopped: failing every open request")
                    with self.lock:
                        open_ = list(self.callbacks.values())
                        self.callbacks.clear()
                    for cb, _ in open_:
                        cb([], True, "engine stopped")
                    time.sleep(0.5)
                continue
            finished = bool(out.is_finished()) if hasattr(out, "is_finished") else str(out.status).endswith("FINISHED")
            error = getattr(out, "error", None)
            with self.lock:
                entry = self.callbacks.get(out.request_id)
                if entry is None:
                    continue
                toks = list(out.generated_tokens or [])
                if len(toks) < entry[1]:
                    # A soft reset (preemption by recompute) folded what was generated into the
                    # request's prompt: its generated tokens start again from the next one.
                    entry[1] = 0
                new = toks[entry[1]:]
                entry[1] = len(toks)
                if finished or error:
                    self.callbacks.pop(out.request_id, None)
            entry[0](new, finished or bool(error), error)

    def stats(self):
        bp = getattr(self.manager, "batch_processor", None)
        sch = getattr(bp, "scheduler", None)
        try:
            return len(sch.active_requests), len(sch.waiting_requests)
        except Exception:
            with self.lock:
                return len(self.callbacks), 0

    def cache_may_come(self):
        """The engine builds its cache on its own thread: it may not be there yet."""
        return self.manager.is_running()

    def kv(self):
        """The paged cache's size and use, and the evictions counted (None: not counted); None
        before the engine built its cache."""
        cache = getattr(getattr(self.manager, "batch_processor", None), "cache", None)
        try:
            total, bs, free = int(cache.num_blocks), int(cache.block_size), int(cache.get_num_free_blocks())
        except Exception:
            return None
        with self.lock:
            n = self.preemptions
        return {"blocks": total, "block_size": bs, "usage": (total - free) / total if total > 0 else 0.0, "preemptions": n}


def check_capacity(gen, max_model_len):
    """Refuses to serve a context the KV cache cannot hold, as vLLM refuses to start: one such
    request stops transformers' whole engine ("No requests can be scheduled and no requests can be
    offloaded"), every other request with it. Waits up to 60 s for the engine to build its cache."""
    kv = None
    for _ in range(600):
        kv = gen.kv()
        if kv is not None or not gen.cache_may_come():
            break
        time.sleep(0.1)
    if kv is None:
        LOG.warning("the KV cache's size is not known: max_model_len not checked against it")
        return
    tokens = kv["blocks"] * kv["block_size"]
    LOG.warning("KV cache: %d blocks of %d tokens (%d tokens)", kv["blocks"], kv["block_size"], tokens)
    if tokens < max_model_len:
        raise SystemExit(f"max_model_len {max_model_len} is more than the {tokens} tokens this GPU's KV cache holds "
                         f"({kv['blocks']} blocks of {kv['block_size']}): raise gpu_memory_utilization or lower max_model_len")


def _count_evictions(gen):
    """transformers keeps no count of the requests its scheduler evicts to free KV blocks (a soft
    reset, which recomputes the request later, or a CPU offload): vLLM's preemptions. Wraps the
    method that evicts, on its class, before the manager builds one; returns the starting count,
    or None where this transformers has no such method gpuvet knows (the front then exports no
    counter: unknown is not zero)."""
    import importlib
    om = "transformers.generation.continuous_batching.offloading_manager"
    # transformers 5.17: offload_requests() evicts some and returns how many; earlier ones evict one a call.
    for mod, cls, meth in ((om, "OffloadingManager", "offload_requests"), (om, "OffloadingManager", "offload_one_request"),
                           ("transformers.generation.continuous_batching.continuous_api", "ContinuousBatchProcessor", "soft_reset_one_request")):
        try:
            klass = getattr(importlib.import_module(mod), cls)
            orig = getattr(klass, meth)
        except (ImportError, AttributeError):
            continue

        def counted(obj, *a, _orig=orig, **kw):
            res = _orig(obj, *a, **kw)
            with gen.lock:
                gen.preemptions += res if isinstance(res, int) and not isinstance(res, bool) else 1
            return res

        setattr(klass, meth, counted)
        LOG.warning("counting KV-cache evictions through %s.%s", cls, meth)
        return 0
    LOG.warning("this transformers has no eviction method gpuvet knows: no preemption counter")
    return None


def _accepts(cls, name):
    import inspect
    try:
        return name in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


class WordTokenizer:
    """The fake generator's tokenizer: one token per word with its leading space (as byte-level BPEs
    hold common words), ids handed out as words are first seen; 0 is the end of sequence."""

    eos_token_id = 0

    def __init__(self):
        self.ids, self.words, self.lock = {"<eos>": 0}, ["<eos>"], threading.Lock()

    def id(self, w):
        with self.lock:
            if w not in self.ids:
                self.ids[w] = len(self.words)
                self.words.append(w)
            return self.ids[w]

    def encode(self, text, add_special_tokens=False):
        import re
        return [self.id(w) for w in re.findall(r"\s*\S+|\s+", text)]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(self.words[i] for i in ids if 0 < i < len(self.words))

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        s = "".join(f"<|im_start|>{m.get('role', '')}\n{_content(m)}<|im_end|>\n" for m in messages)
        return s + ("<|im_start|>assistant\n" if add_generation_prompt else "")


FAKE_CHUNK = 256  # the fake engine's prefill chunk, in tokens


class FakeGenerator:
    """Continuous batching without a model: every step (--fake-step-ms) each running request gets one
    token (the words " a" … " z"). For a prompt ending in 'STOP' the third token is the EOS id, as a
    model may make it: the engine ends the request there unless ignore_eos, and with ignore_eos it
    goes on, the EOS id one token among others (what transformers does with eos_token_id=-1 and
    vLLM with ignore_eos).

    With --fake-kv-tokens N its KV cache holds N tokens (a request holds its prompt and what it
    generated) and the newest request is preempted when the next step does not fit (_schedule),
    counted as a preemption."""

    version = "fake"

    def __init__(self, args):
        self.tokenizer = WordTokenizer()
        self.eos = WordTokenizer.eos_token_id
        self.letters = [self.tokenizer.id(" " + chr(97 + k)) for k in range(26)]
        self.step = args.fake_step_ms / 1000.0
        self.cap = max(args.fake_kv_tokens, 0)
        self.preemptions = 0
        self.lock = threading.Lock()
        self.reqs = {}  # every open request, in arrival order
        self.running = []  # request ids holding KV, in admission order
        threading.Thread(target=self._loop, name="fake-engine", daemon=True).start()

    def submit(self, ids, max_new_tokens, ignore_eos, callback):
        rid = "fake-" + uuid.uuid4().hex
        eos_at = 3 if self.tokenizer.decode(ids).rstrip().endswith("STOP") else 0
        with self.lock:
            self.reqs[rid] = {"cb": callback, "n": 0, "max": max_new_tokens, "eos_at": eos_at, "ignore_eos": ignore_eos,
                              "ctx": len(ids), "filled": 0}
        return rid

    def cancel(self, rid):
        """As transformers' manager: cancelling a request it no longer holds is a mistake it logs."""
        with self.lock:
            open_ = self.reqs.pop(rid, None) is not None
            if rid in self.running:
                self.running.remove(rid)
        if not open_:
            LOG.warning("fake engine: attempted to cancel non-existent request_id: %s", rid)
        return open_

    def _held(self):
        return sum(self.reqs[r]["filled"] for r in self.running)

    def _schedule(self):
        """The requests that make a token this step (under the lock). With a KV budget, a request is
        prefilled in chunks of FAKE_CHUNK tokens (chunked prefill: its blocks are taken chunk by
        chunk) and then decodes a token a step; one is admitted while its next chunk fits, and when
        the running ones' next step does not fit, the newest is preempted: its KV freed, its prompt
        and what it generated computed again once it is back (vLLM's and transformers' recompute)."""
        if self.cap == 0:
            return list(self.reqs.items())

        def need(r):
            return min(FAKE_CHUNK, r["ctx"] + r["n"] - r["filled"]) or 1

        held = self._held()
        for rid, r in self.reqs.items():  # admit in arrival order while the first chunk fits
            if rid in self.running:
                continue
            if self.running and held + sum(need(self.reqs[x]) for x in self.running) + need(r) > self.cap:
                break
            self.running.append(rid)
        while len(self.running) > 1 and held + sum(need(self.reqs[x]) for x in self.running) > self.cap:
            victim = self.running.pop()
            held -= self.reqs[victim]["filled"]
            self.reqs[victim]["filled"] = 0
            self.preemptions += 1
        decoding = []
        for rid in self.running:
            r = self.reqs[rid]
            if r["filled"] < r["ctx"] + r["n"]:
                r["filled"] += need(r)
            else:
                r["filled"] += 1
                decoding.append((rid, r))
        return decoding

    def _loop(self):
        while True:
            time.sleep(self.step)
            with self.lock:
                batch = self._schedule()
            for rid, r in batch:
                r["n"] += 1
                tok = self.eos if r["n"] == r["eos_at"] else self.letters[(r["n"] - 1) % 26]
                done = r["n"] >= r["max"] or (tok == self.eos and not r["ignore_eos"])
                if done:
                    with self.lock:
                        self.reqs.pop(rid, None)
                        if rid in self.running:
                            self.running.remove(rid)
                r["cb"]([tok], done, None)

    def stats(self):
        with self.lock:
            if self.cap == 0:
                return len(self.reqs), 0
            return len(self.running), len(self.reqs) - len(self.running)

    def cache_may_come(self):
        return False

    def kv(self):
        if self.cap == 0:
            return None
        with self.lock:
            return {"blocks": self.cap // 16, "block_size": 16, "usage": self._held() / self.cap,
                    "preemptions": self.preemptions}


def _content(m):
    c = m.get("content", "")
    if isinstance(c, list):  # OpenAI content parts: text parts only
        return "".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
    return c if isinstance(c, str) else ""


# ---------------------------------------------------------------------------------------------------
# The HTTP front.

GREEDY_ONLY = {"temperature": (0, None), "top_p": (1, None), "top_k": (-1, 0, None), "seed": None}
UNSUPPORTED = ["n", "best_of", "logprobs", "top_logprobs", "echo", "stop", "stop_token_ids", "tools",
               "tool_choice", "response_format", "logit_bias", "suffix", "presence_penalty", "frequency_penalty"]


class Front:
    def __init__(self, gen, args):
        self.gen = gen
        self.tok = gen.tokenizer
        self.served = args.served_model_name or args.model
        self.max_model_len = args.max_model_len
        self.created = int(time.time())
        self.ready = True
        self.streamed = 0  # output tokens written to streams so far (the event loop's thread only)
        self.decode_stream = None
        try:
            from tokenizers.decoders import DecodeStream  # incremental detokenisation, O(1) per token
            if hasattr(self.tok, "backend_tokenizer"):
                self.decode_stream = DecodeStream
        except ImportError:
            pass

    async def tick(self, app):
        """Logs the running token total every 0.1 s while it changes (see the module's docstring)."""
        async def loop():
            last = -1
            while True:
                await asyncio.sleep(0.1)
                if self.streamed != last:
                    last = self.streamed
                    LOG.info("gpuvet-front tokens at=%.6f total=%d", time.time(), last)
        task = asyncio.get_running_loop().create_task(loop())
        yield
        task.cancel()

    # --- request parsing -------------------------------------------------------------------------
    def check_params(self, body):
        if not isinstance(body, dict):
            raise APIError(400, "request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != self.served:
            raise APIError(404, f"The model `{model}` does not exist.", "model", "NotFoundError")
        for name in UNSUPPORTED:
            v = body.get(name)
            if v in (None, False, [], 0) or (name in ("n", "best_of") and v == 1):
                continue
            raise APIError(400, f"{name}: not supported by gpuvet's transformers front (greedy, one choice, "
                                f"no stop strings or tools)", name)
        for name, ok in GREEDY_ONLY.items():
            v = body.get(name)
            if name == "seed" or v is None:
                continue
            if v not in ok:
                raise APIError(400, f"{name}={v}: the transformers front decodes greedily for every request "
                                    f"(one GenerationConfig); send {ok[0]} or leave it out", name)
        mt = body.get("max_tokens", body.get("max_completion_tokens"))
        if mt is not None and (not isinstance(mt, int) or isinstance(mt, bool) or mt < 1):
            raise APIError(400, f"max_tokens: want an integer ≥ 1, got {mt!r}", "max_tokens")
        so = body.get("stream_options") or {}
        if not isinstance(so, dict):
            raise APIError(400, "stream_options: want an object", "stream_options")
        return mt, so

    def prompt_ids(self, body, chat):
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
                raise APIError(400, "messages: want a non-empty list of {role, content} objects", "messages")
            text = self.tok.apply_chat_template(
                [{"role": m.get("role", "user"), "content": _content(m)} for m in msgs],
                add_generation_prompt=True, tokenize=False)
            return self.tok.encode(text, add_special_tokens=False)
        p = body.get("prompt")
        if isinstance(p, list) and len(p) == 1:
            p = p[0]
        if isinstance(p, str):
            return self.tok.encode(p, add_special_tokens=False)
        if isinstance(p, list) and p and all(isinstance(i, int) and not isinstance(i, bool) for i in p):
            return p
        raise APIError(400, "prompt: want a string, a list of one string, or a list of token ids", "prompt")

    # --- handlers --------------------------------------------------------------------------------
    async def health(self, _):
        return web.Response(text="ok") if self.ready else web.Response(status=503, text="loading")

    async def models(self, _):
        return web.json_response({"object": "list", "data": [{
            "id": self.served, "object": "model", "created": self.created, "owned_by": "gpuvet-transformers-front",
            "root": self.served, "max_model_len": self.max_model_len}]})

    async def metrics(self, _):
        running, waiting = self.gen.stats()
        text = ("# HELP transformers_cb:num_requests_running Requests in the continuous batch.\n"
                "# TYPE transformers_cb:num_requests_running gauge\n"
                f"transformers_cb:num_requests_running {running}\n"
                "# HELP transformers_cb:num_requests_waiting Requests waiting for the batch.\n"
                "# TYPE transformers_cb:num_requests_waiting gauge\n"
                f"transformers_cb:num_requests_waiting {waiting}\n")
        kv = self.gen.kv()
        if kv is not None:
            text += ("# HELP transformers_cb:kv_cache_usage_perc Share of the paged KV cache's blocks in use (0-1).\n"
                     "# TYPE transformers_cb:kv_cache_usage_perc gauge\n"
                     f"transformers_cb:kv_cache_usage_perc {kv['usage']:.6f}\n"
                     "# HELP transformers_cb:cache_config_info The paged KV cache's size.\n"
                     "# TYPE transformers_cb:cache_config_info gauge\n"
                     f'transformers_cb:cache_config_info{{block_size="{kv["block_size"]}",num_gpu_blocks="{kv["blocks"]}"}} 1\n')
            if kv["preemptions"] is not None:
                text += ("# HELP transformers_cb:num_preemptions_total Requests evicted from the KV cache to free blocks.\n"
                         "# TYPE transformers_cb:num_preemptions_total counter\n"
                         f"transformers_cb:num_preemptions_total {kv['preemptions']}\n")
        return web.Response(text=text, content_type="text/plain")

    async def tokenize(self, request):
        try:
            body = await request.json()
            self.check_params({k: body.get(k) for k in ("model",)} if isinstance(body, dict) else body)
            ids = self.prompt_ids(body, "messages" in body)
        except APIError as e:
            return self.error(e)
        except ValueError:
            return self.error(APIError(400, "body is not JSON"))
        return web.json_response({"count": len(ids), "tokens": ids, "max_model_len": self.max_model_len})

    async def completions(self, request):
        return await self.generate(request, chat=False)

    async def chat(self, request):
        return await self.generate(request, chat=True)

    def error(self, e):
        return web.json_response({"error": {"message": e.message, "type": e.kind, "param": e.param, "code": e.status},
                                  "object": "error", "message": e.message}, status=e.status)

    async def generate(self, request, chat):
        arrive = time.time()
        try:
            try:
                body = await request.json()
            except ValueError:
                raise APIError(400, "body is not JSON")
            mt, so = self.check_params(body)
            ids = self.prompt_ids(body, chat)
            room = self.max_model_len - len(ids)
            if room < 1 or (mt is not None and mt > room):
                raise APIError(400, f"This model's maximum context length is {self.max_model_len} tokens. However, "
                                    f"you requested {len(ids) + (mt or 0)} tokens ({len(ids)} in the messages, "
                                    f"{mt or 0} in the completion). Please reduce the length of the messages or completion.",
                               "max_tokens")
            max_new = mt if mt is not None else room
            ignore_eos = bool(body.get("ignore_eos", False))
            q = asyncio.Queue()
            loop = asyncio.get_running_loop()

            def on_tokens(new, done, err):
                loop.call_soon_threadsafe(q.put_nowait, (new, done, err))

            rid = self.gen.submit(ids, max_new, ignore_eos, on_tokens)
        except APIError as e:
            return self.error(e)
        stream = bool(body.get("stream", False))
        state = {"n": 0, "first": None, "finish": None, "rid": rid, "ids": [], "ignore_eos": ignore_eos, "eos": 0}
        try:
            if stream:
                return await self.stream(request, body, chat, ids, q, so, state, max_new)
            return await self.whole(body, chat, ids, q, state, max_new)
        finally:
            if state["finish"] is None:  # the client went away: free the engine's slot, if it still holds one
                state["finish"] = "cancelled" if self.gen.cancel(rid) else "client_gone"
            LOG.info("gpuvet-front done id=%s prompt_tokens=%d output_tokens=%d arrive=%.6f first=%.6f end=%.6f finish=%s "
                     "max_tokens=%d ignore_eos=%d eos_tokens=%d", rid, len(ids), state["n"], arrive, state["first"] or 0,
                     time.time(), state["finish"], max_new, int(ignore_eos), state["eos"])

    def detok(self):
        """A per-request incremental detokeniser: tokenizers' DecodeStream where it works, else the
        difference of whole decodes (holding back an incomplete UTF-8 sequence)."""
        seen, prev = [], [""]

        def by_diff(t):
            seen.append(t)
            s = self.tok.decode(seen, skip_special_tokens=True)
            if s.endswith("\ufffd"):
                return ""
            out, prev[0] = s[len(prev[0]):], s
            return out

        def flush():
            """What the stream held back (an incomplete UTF-8 sequence at the end): sent once the
            request finishes, with replacement characters, as vLLM's detokeniser does."""
            s = self.tok.decode(seen, skip_special_tokens=True)
            out, prev[0] = s[len(prev[0]):], s
            return out

        by_diff.flush = flush
        if self.decode_stream is None:
            return by_diff
        try:
            ds, backend = self.decode_stream(skip_special_tokens=True), self.tok.backend_tokenizer
        except Exception as e:
            LOG.warning("DecodeStream unusable (%s): decoding by difference", e)
            self.decode_stream = None
            return by_diff
        state = {"stream": True}

        def step(t):
            if state["stream"]:
                try:
                    out = ds.step(backend, t) or ""
                    seen.append(t)
                    prev[0] += out
                    return out
                except Exception as e:  # an id the stream cannot take: carry on by difference
                    LOG.warning("DecodeStream.step(%d) failed (%s): decoding by difference", t, e)
                    state["stream"] = False
            return by_diff(t)
        step.flush = flush
        return step

    async def tokens(self, q, state, max_new):
        """Yields (text, token count) as the engine produces them; sets finish."""
        step = self.detok()
        while True:
            new, done, err = await q.get()
            if err:
                state["finish"] = "error"
                raise RuntimeError(str(err))
            text, n = "", 0
            for t in new:
                # EOS ends a request only where EOS is honoured. With ignore_eos the engine generates
                # past it (eos_token_id=-1), so it is one more token, as in vLLM: ending the stream
                # here was a short output despite ignore_eos (an H200 run's 2 short_output).
                if t == self.gen.eos:
                    if not state["ignore_eos"]:
                        done = True
                        state["finish"] = "stop"
                        break
                    state["eos"] += 1  # the model made EOS; the request goes on (logged: eos_tokens=)
                text += step(t)
                state["ids"].append(t)
                n += 1
            if n:
                if state["first"] is None:
                    state["first"] = time.time()
                state["n"] += n
                yield text, n
            if done:
                if state["finish"] is None:
                    state["finish"] = "length" if state["n"] >= max_new else "stop"
                tail = step.flush()
                if tail:
                    yield tail, 0
                return

    def usage(self, ids, state):
        return {"prompt_tokens": len(ids), "completion_tokens": state["n"], "total_tokens": len(ids) + state["n"]}

    async def whole(self, body, chat, ids, q, state, max_new):
        parts = []
        try:
            async for text, _ in self.tokens(q, state, max_new):
                parts.append(text)
        except RuntimeError as e:
            return self.error(APIError(500, f"engine error: {e}", kind="InternalServerError"))
        text = "".join(parts)
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        choice = {"index": 0, "finish_reason": state["finish"], "logprobs": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        if body.get("return_token_ids"):  # vLLM's field (0.10.2+): the output's token ids, for gpuvet's greedy case
            choice["token_ids"] = list(state["ids"])
        return web.json_response({"id": cid, "object": "chat.completion" if chat else "text_completion",
                                  "created": int(time.time()), "model": self.served, "choices": [choice],
                                  "usage": self.usage(ids, state)})

    async def stream(self, request, body, chat, ids, q, so, state, max_new):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())
        continuous = bool(so.get("continuous_usage_stats"))

        async def send(choices, usage=None):
            d = {"id": cid, "object": obj, "created": created, "model": self.served, "choices": choices}
            if usage is not None:
                d["usage"] = usage
            await resp.write(b"data: " + json.dumps(d, separators=(",", ":")).encode() + b"\n\n")

        def choice(text, finish=None):
            c = {"index": 0, "finish_reason": finish, "logprobs": None}
            if chat:
                c["delta"] = {"content": text} if text or finish is None else {}
            else:
                c["text"] = text
            return c

        if chat:  # vLLM's first chunk carries the role only
            await send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}],
                       self.usage(ids, state) if continuous else None)
        try:
            async for text, n in self.tokens(q, state, max_new):
                if request.transport is None or request.transport.is_closing():
                    return resp  # the client went away: what the engine still makes is not streamed
                await send([choice(text)], self.usage(ids, state) if continuous else None)
                self.streamed += n  # counted once written: a token for a client gone is not streamed
        except RuntimeError as e:
            await resp.write(b"data: " + json.dumps({"error": {"message": f"engine error: {e}", "code": 500}}).encode() + b"\n\n")
            return resp
        await send([choice("", state["finish"])], self.usage(ids, state) if continuous else None)
        if so.get("include_usage"):
            await send([], self.usage(ids, state))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="local model folder or hub id (HF_HUB_OFFLINE=1 for offline)")
    ap.add_argument("--served-model-name", default="", help="the name clients send (default: --model)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                    help="share of free GPU memory for the paged KV cache (ContinuousBatchingConfig.max_memory_percent)")
    ap.add_argument("--max-batch-tokens", type=int, default=0, help="tokens per engine step (0: transformers' default)")
    ap.add_argument("--max-num-seqs", type=int, default=0, help="requests per engine step (0: transformers' default)")
    ap.add_argument("--compile-level", type=int, default=0, help="ContinuousBatchingConfig.default_compile_level (0: none)")
    ap.add_argument("--attn-implementation", default="paged|sdpa")
    ap.add_argument("--cuda-graphs", dest="cuda_graphs", action="store_true", default=None)
    ap.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward (CompileConfig)")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip CUDA-graph capture at start")
    ap.add_argument("--generator", choices=["transformers", "fake"], default="transformers")
    ap.add_argument("--fake-step-ms", type=float, default=5.0)
    ap.add_argument("--fake-kv-tokens", type=int, default=0, help="the fake engine's KV cache in tokens (0: unbounded)")
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    if args.max_model_len < 2:
        ap.error("--max-model-len: want ≥ 2")
    if not 0 < args.gpu_memory_utilization <= 1:
        ap.error("--gpu-memory-utilization: want a fraction in (0, 1]")
    gen = FakeGenerator(args) if args.generator == "fake" else TransformersGenerator(args)
    check_capacity(gen, args.max_model_len)
    front = Front(gen, args)
    app = web.Application(client_max_size=64 << 20)
    app.cleanup_ctx.append(front.tick)
    app.add_routes([web.get("/health", front.health), web.get("/v1/models", front.models),
                    web.get("/metrics", front.metrics), web.post("/tokenize", front.tokenize),
                    web.post("/v1/completions", front.completions), web.post("/v1/chat/completions", front.chat)])
    LOG.warning("gpuvet transformers front (%s) serving %s on http://%s:%d, max_model_len %d",
                gen.version, front.served, args.host, args.port, args.max_model_len)
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None)
    os._exit(0)  # the engine's threads are not daemons in every transformers version


if __name__ == "__main__":
    main()
