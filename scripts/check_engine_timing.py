#!/usr/bin/env python3
"""Hold gpuvet's TTFT and output tok/s against the engine's own timing log (kind transformers).

  python3 scripts/check_engine_timing.py OUT/summary.json

The transformers front logs one line per finished request with its arrival, first-token and end times
(unix seconds, taken inside the server), and every 0.1 s the running total of output tokens it has
streamed. For every endpoint of the summary this prints, beside gpuvet's figures:
- TTFT: the server's first-token time of the requests that ran alone with the synchronous rung's
  prompt and output lengths (gpuvet's own synchronous requests; probes and the API suite are left out).
  The client's figure must be the server's plus the HTTP hop: a little more, never less.
- output tok/s of every rung: the server's tokens streamed over gpuvet's own window of that rung. The
  window is exact: summary.json gives the load's start on the wall clock (load.started_at) and each
  window's start and length (window_start_s, window_seconds), and the engine runs on the same host;
  the front's running total, read at both ends (linear between its 0.1 s lines), is what it streamed
  in between, requests complete or not. Summaries or logs without these fall back to the older
  estimate: throughput rungs only, the window found as the burst of arrivals, each request's tokens
  spread evenly from its first token to its end (which does not hold when requests outlast the window
  and prefills crowd its first seconds: that estimate read 0.6 of gpuvet at such rungs).
Exit status 1 when an exact row is outside 0.97–1.03.
"""

import json
import os
import re
import statistics
import sys

LINE = re.compile(r"gpuvet-front done id=(\S+) prompt_tokens=(\d+) output_tokens=(\d+) arrive=([\d.]+) first=([\d.]+) end=([\d.]+)")
TICK = re.compile(r"gpuvet-front tokens at=([\d.]+) total=(\d+)")


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


def ticks(path):
    """The front's running token totals: [(unix s, total)], in time order."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = TICK.search(line)
            if m:
                out.append((float(m.group(1)), int(m.group(2))))
    out.sort()
    return out


def total_at(ts, t):
    """The running total at time t, linear between two tick lines (the count is flat before the
    first tick's predecessor, i.e. 0 before anything streamed, and flat after the last)."""
    if not ts or t <= ts[0][0] - 0.1:
        return 0.0
    if t <= ts[0][0]:  # inside the first tick's 0.1 s
        return ts[0][1] * (t - (ts[0][0] - 0.1)) / 0.1
    lo, hi = 0, len(ts) - 1
    if t >= ts[hi][0]:
        return float(ts[hi][1])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ts[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    (t0, n0), (t1, n1) = ts[lo], ts[hi]
    # The total changes only at tokens; a gap longer than a tick means nothing streamed in it
    # but its last 0.1 s (the tick logs within 0.1 s of a change).
    start = max(t0, t1 - 0.1)
    if t <= start:
        return float(n0)
    return n0 + (n1 - n0) * (t - start) / (t1 - start)


def parse_time(s):
    """RFC 3339 (Go's time.Time in JSON) to unix seconds."""
    from datetime import datetime
    s = s.replace("Z", "+00:00")
    m = re.match(r"(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)", s)
    frac = float(m.group(2) or 0)
    return datetime.fromisoformat(m.group(1) + m.group(3)).timestamp() + frac


def exact_rows(load, ts):
    """(label, gpuvet output tok/s, log output tok/s, ratio) for every rung, from the exact window."""
    t0 = parse_time(load["started_at"])
    rows = []
    for r in load.get("runs", []):
        w = r.get("window_seconds", 0)
        if w <= 0 or "window_start_s" not in r:
            continue
        windows = [(r["window_start_s"], w)]
        rep = r.get("repeat") or {}
        if rep.get("window_start_s"):
            # The synchronous rung in blocks: the engine's tokens over each block's own window.
            windows = list(zip(rep["window_start_s"], rep["window_seconds"]))
        elif rep.get("start_s"):
            # An older summary: the blocks' windows are not in it, and the span from the first to
            # the last holds every other rung. Its TTFT check above still holds.
            continue
        srv = sum(total_at(ts, t0 + a + n) - total_at(ts, t0 + a) for a, n in windows) / sum(n for _, n in windows)
        label = f"{r['kind']} c={r['concurrency']}" if r.get("concurrency") else f"{r['kind']} {r.get('target_rate', 0):.3g} req/s"
        if rep.get("start_s"):
            label += f", {len(windows)} blocks"
        rows.append((label, r["output_tok_s"], srv, r["output_tok_s"] / srv if srv else float("nan"), r["requests"]))
    return rows


def block_windows(load, sync):
    """The synchronous rung's block windows in unix seconds, where the summary says when they ran
    (None: it does not): gpuvet's figure holds those requests only (not a block's first, sent before
    its window, nor the warm-up's or the API suite's, which send prompts of the same length alone too)."""
    rep = sync.get("repeat") or {}
    if not load.get("started_at") or not rep.get("window_start_s"):
        return None
    t0 = parse_time(load["started_at"])
    return [(t0 + w, t0 + w + n) for w, n in zip(rep["window_start_s"], rep["window_seconds"])]


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
    bad = 0
    for h in s.get("hosts", []):
        for m in h.get("models", []):
            for e in m.get("endpoints", []):
                log = e.get("log_file")
                if not log:
                    continue
                log = log if os.path.isabs(log) else os.path.join(base, log)
                reqs, ts = parse(log), ticks(log)
                load = e.get("load") or {}
                runs = load.get("runs", [])
                gpus = ",".join(map(str, e["gpus"]))
                sync = next((r for r in runs if r["kind"] == "synchronous"), None)
                if sync:
                    wins = block_windows(load, sync)
                    alone = [r for r in isolated(reqs) if r["prompt"] == round(sync["mean_prompt_tokens"]) and r["first"] > 0
                             and (wins is None or any(a <= r["arrive"] <= b for a, b in wins))]
                    srv = statistics.median((r["first"] - r["arrive"]) * 1000 for r in alone) if alone else float("nan")
                    print(f"{m['model']} on gpu {gpus}: sync TTFT p50 gpuvet {sync['ttft_ms']['p50']:.1f} ms, engine log {srv:.1f} ms (n={len(alone)} requests alone)")
                if ts and load.get("started_at"):
                    print()
                    print("| rung | completed / incomplete / streamed | gpuvet output tok/s | engine log, same window | gpuvet ÷ log |")
                    print("| --- | --- | --- | --- | --- |")
                    for label, g, srv, ratio, rq in exact_rows(load, ts):
                        ok = 0.97 <= ratio <= 1.03
                        bad += not ok
                        print(f"| {label} | {rq.get('successful', 0)} / {rq.get('incomplete', 0)} / {rq.get('streamed', 0)} | {g:.1f} | {srv:.1f} | {ratio:.3f}{'' if ok else ' (outside 0.97–1.03)'} |")
                    continue
                # The older estimate (no token totals in the log, or a summary without window times).
                print("| throughput rung | gpuvet output tok/s | engine log estimate (burst, spread tokens) | gpuvet ÷ log |")
                print("| --- | --- | --- | --- |")
                after = float("-inf")
                for thr in [r for r in runs if r["kind"] == "throughput"]:
                    at = burst_start(reqs, thr.get("concurrency", 0), after)
                    if at is None or thr["window_seconds"] <= 0:
                        continue
                    srv = rate(reqs, at, thr["window_seconds"])
                    after = at + thr["window_seconds"]
                    print(f"| c={thr.get('concurrency', 0)} | {thr['output_tok_s']:.0f} | {srv:.0f} | {(thr['output_tok_s'] / srv) if srv else float('nan'):.3f} |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
