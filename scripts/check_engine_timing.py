#!/usr/bin/env python3
"""Hold gpuvet's TTFT and output tok/s against the engine's own timing log (kind transformers).

  python3 scripts/check_engine_timing.py OUT/summary.json

The transformers front logs one line per finished request with its arrival, first-token and end times
(unix seconds, taken inside the server). For every endpoint of the summary this prints, beside
gpuvet's figures: the server's TTFT of the requests that ran alone (the synchronous rung), and the
server's best output tok/s over a sliding window as long as gpuvet's peak rung (each request's tokens
spread evenly from its first token to its end).
"""

import json
import os
import re
import statistics
import sys

LINE = re.compile(r"gpuvet-front done id=(\S+) prompt_tokens=(\d+) output_tokens=(\d+) arrive=([\d.]+) first=([\d.]+) end=([\d.]+)")


def parse(path):
    reqs = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                _, p, o, a, fi, e = m.groups()
                reqs.append(dict(prompt=int(p), out=int(o), arrive=float(a), first=float(fi), end=float(e)))
    reqs.sort(key=lambda r: r["arrive"])
    return reqs


def isolated(reqs):
    """Requests during which no other request was in the server."""
    out = []
    for i, r in enumerate(reqs):
        prev_end = reqs[i - 1]["end"] if i else 0
        next_arr = reqs[i + 1]["arrive"] if i + 1 < len(reqs) else float("inf")
        if r["arrive"] >= prev_end and r["end"] <= next_arr and r["first"] > 0:
            out.append(r)
    return out


def peak_rate(reqs, window):
    """Best output tok/s over any window of that length, tokens spread over [first, end]."""
    reqs = [r for r in reqs if r["first"] > 0 and r["out"] > 0]
    if not reqs:
        return 0.0
    t0, t1 = min(r["first"] for r in reqs), max(r["end"] for r in reqs)
    best, step = 0.0, 0.25
    t = t0
    while t + window <= t1 + step:
        tok = 0.0
        for r in reqs:
            span = max(r["end"] - r["first"], 1e-9)
            lo, hi = max(r["first"], t), min(r["end"], t + window)
            if hi > lo:
                tok += r["out"] * (hi - lo) / span
        best = max(best, tok / window)
        t += step
    return best


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    base = os.path.dirname(path)
    s = json.load(open(path))
    print("| model | GPU | gpuvet sync TTFT p50 (ms) | engine log TTFT p50, requests alone (ms) | gpuvet peak output tok/s | engine log best output tok/s over the same window | ratio gpuvet ÷ log |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for h in s.get("hosts", []):
        for m in h.get("models", []):
            for e in m.get("endpoints", []):
                log = e.get("log_file")
                if not log:
                    continue
                reqs = parse(log if os.path.isabs(log) else os.path.join(base, log))
                ld = e.get("load") or {}
                runs = ld.get("runs", [])
                sync = next((r for r in runs if r["kind"] == "synchronous"), None)
                peak = max(runs, key=lambda r: r.get("output_tok_s", 0), default=None)
                alone = isolated(reqs)
                srv_ttft = statistics.median((r["first"] - r["arrive"]) * 1000 for r in alone) if alone else float("nan")
                srv_peak = peak_rate(reqs, peak["window_seconds"]) if peak else float("nan")
                g_ttft = sync["ttft_ms"]["p50"] if sync else float("nan")
                g_peak = ld.get("peak_output_tok_s", float("nan"))
                ratio = g_peak / srv_peak if srv_peak else float("nan")
                print(f"| {m['model']} | {','.join(map(str, e['gpus']))} | {g_ttft:.1f} | {srv_ttft:.1f} (n={len(alone)}) | "
                      f"{g_peak:.0f} | {srv_peak:.0f} (window {peak['window_seconds'] if peak else 0:.1f} s, {len(reqs)} requests logged) | {ratio:.3f} |")


if __name__ == "__main__":
    main()
