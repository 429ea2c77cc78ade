#!/usr/bin/env python3
"""Issue 41's short outputs on a real engine: requests with ignore_eos and max_tokens, before and
after storms of cancelled (cut) streams like the knee probe's. Prints, per phase, how many complete
requests returned fewer tokens than asked, with their finish reasons; one JSON line per request to --out."""
import argparse, asyncio, json, random, re, time
import aiohttp

def words(path):
    return sorted(set(re.findall(r'"([a-z]+)"', open(path).read())))

def prompt(ws, k, n=500):
    r = random.Random(k)
    return " ".join(r.choice(ws) for _ in range(n))

MODEL = ["m"]

async def one(s, url, p, max_tokens, rec):
    body = {"model": MODEL[0], "prompt": p, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    rec.update(chunks=0, usage=None, finish=None, t0=time.time())
    async with s.post(url + "/v1/completions", json=body) as r:
        rec["http"] = r.status
        async for line in r.content:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            d = json.loads(line[6:])
            if "error" in d:
                rec["error"] = d["error"]
                continue
            if d.get("usage"):
                rec["usage"] = d["usage"].get("completion_tokens")
            for c in d.get("choices", []):
                if c.get("text"):
                    rec["chunks"] += 1
                if c.get("finish_reason"):
                    rec["finish"] = c["finish_reason"]
    rec["t1"] = time.time()

async def closed(s, url, ws, phase, n, conc, max_tokens, out, base):
    sem = asyncio.Semaphore(conc)
    recs = []
    async def w(k):
        async with sem:
            rec = {"phase": phase, "k": base + k}
            recs.append(rec)
            try:
                await one(s, url, prompt(ws, base + k), max_tokens, rec)
            except Exception as e:
                rec["exc"] = repr(e)
    await asyncio.gather(*(w(k) for k in range(n)))
    short = [r for r in recs if (r.get("usage") or 0) < max_tokens]
    for r in recs:
        out.write(json.dumps(r) + "\n")
    print(f"{phase}: {len(recs)} requests, {len(short)} short:",
          [(r["k"], r.get("usage"), r.get("chunks"), r.get("finish"), r.get("error"), r.get("exc")) for r in short], flush=True)

async def storm(s, url, ws, phase, n, secs, max_tokens, base):
    recs = [{"phase": phase, "k": base + k} for k in range(n)]
    tasks = [asyncio.ensure_future(one(s, url, prompt(ws, base + k), max_tokens, recs[k])) for k in range(n)]
    await asyncio.sleep(secs)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"{phase}: {n} streams cut after {secs} s; {sum(1 for r in recs if r.get('t1'))} had completed", flush=True)

async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--words", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--conc", type=int, default=12)
    ap.add_argument("--storm", type=int, default=128)
    ap.add_argument("--storm-secs", type=float, default=20)
    a = ap.parse_args()
    ws = words(a.words)
    conn = aiohttp.TCPConnector(limit=0)
    out = open(a.out, "w")
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as s:
        async with s.get(a.url + "/v1/models") as r:
            MODEL[0] = (await r.json())["data"][0]["id"]
        await closed(s, a.url, ws, "control", a.n, a.conc, 256, out, 0)
        for c in range(a.cycles):
            await storm(s, a.url, ws, f"storm{c}", a.storm, a.storm_secs, 256, 10000 * (c + 1))
            await asyncio.sleep(1)
            await closed(s, a.url, ws, f"after{c}", a.n, a.conc, 256, out, 0)

asyncio.run(main())
