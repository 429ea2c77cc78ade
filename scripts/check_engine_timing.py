#!/usr/bin/env python3
"""Hold gpuvet's TTFT and output tok/s against the engine's own timing log (kind transformers).

  python3 scripts/check_engine_timing.py OUT/summary.json

The transformers front logs one line per finished request with its arrival, first-token and end times
(unix seconds, taken inside the server). For every endpoint of the summary this prints, beside
gpuvet's figures:
- TTFT: the server's first-token time of the requests that ran alone with the synchronous rung's
  prompt and output lengths (gpuvet's own synchronous requests; probes and the API suite are left out).
  The client's figure must be the server's plus the HTTP hop: a little more, never less.
- output tok/s: the server's token rate over gpuvet's throughput window, found in the log as the burst
  of requests the throughput rung sends at once (its concurrency within half a second), for as long as
  gpuvet's window; each request's tokens are spread evenly from its first token to its end.
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


def burst_start(reqs, n, after=float("-inf")):
    """Arrival time of the first burst (>= n/2 arrivals within 0.5 s) that starts after `after`.

    The knee search runs several throughput rungs, each a larger burst, so each rung is matched with
    the first burst past the previous rung's window, not with the largest burst in the log."""
    need = max(2, n // 2)
    arrivals = [r["arrive"] for r in reqs if r["arrive"] > after]
    j = 0
    for i, t in enumerate(arrivals):
        while arrivals[j] < t - 0.5:
            j += 1
        if i - j + 1 >= need:
            return arrivals[j]
    return None


def rate(reqs, t, window):
    tok = 0.0
    for r in reqs:
        if r["first"] <= 0 or r["out"] <= 0:
            continue
        span = max(r["end"] - r["first"], 1e-9)
        lo, hi = max(r["first"], t), min(r["end"], t + window)
        if hi > lo:
            tok += r["out"] * (hi - lo) / span
    return tok / window


def peak_rate(reqs, window):
    """Best output tok/s over any window of that length, tokens spread over [first, end]."""
    reqs = [r for r in reqs if r["first"] > 0 and r["out"] > 0]
    if not reqs or window <= 0:
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
    print("| model | GPU | gpuvet sync TTFT p50 (ms) | engine log TTFT p50, same requests (ms) | gpuvet throughput-rung output tok/s | engine log output tok/s, same window | gpuvet ÷ log |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for h in s.get("hosts", []):
        for m in h.get("models", []):
            for e in m.get("endpoints", []):
                log = e.get("log_file")
                if not log:
                    continue
                reqs = parse(log if os.path.isabs(log) else os.path.join(base, log))
                runs = (e.get("load") or {}).get("runs", [])
                sync = next((r for r in runs if r["kind"] == "synchronous"), None)
                g_ttft = srv_ttft = float("nan")
                n_alone = 0
                if sync:
                    g_ttft = sync["ttft_ms"]["p50"]
                    alone = [r for r in isolated(reqs) if r["prompt"] == round(sync["mean_prompt_tokens"])
                             and r["out"] == round(sync["mean_output_tokens"])]
                    n_alone = len(alone)
                    if alone:
                        srv_ttft = statistics.median((r["first"] - r["arrive"]) * 1000 for r in alone)
                thrs = [r for r in runs if r["kind"] == "throughput"] or [None]
                after = float("-inf")
                for thr in thrs:  # one row per throughput rung (the knee search runs several)
                    g_rate = srv_rate = float("nan")
                    at = burst_start(reqs, thr.get("concurrency", 0), after) if thr else None
                    if thr and at is not None and thr["window_seconds"] > 0:
                        g_rate, srv_rate = thr["output_tok_s"], rate(reqs, at, thr["window_seconds"])
                        after = at + thr["window_seconds"]
                    print(f"| {m['model']} | {','.join(map(str, e['gpus']))} | {g_ttft:.1f} | {srv_ttft:.1f} (n={n_alone}) | "
                          f"{g_rate:.0f} | {srv_rate:.0f} ({thr['window_seconds'] if thr else 0:.1f} s from the burst of {thr.get('concurrency', 0) if thr else 0}) | "
                          f"{(g_rate / srv_rate) if srv_rate else float('nan'):.3f} |")

if __name__ == "__main__":
    main()
