#!/usr/bin/env python3
"""Issue 33's figures as markdown tables, from gpuvet's own files:

  python3 scripts/correct_tables.py [--health health.json] [--summary OUT/summary.json]

- result checks: per GPU, each GEMM microbenchmark's and the burn's checked results and mismatches
  (health.json from `gpuvet health --out`, or the health of a summary);
- the greedy case: per endpoint, what was compared (token ids or text), the repeat, the outputs'
  first tokens, and the judge's "outputs differ" flags;
- telemetry under the load: per endpoint and GPU, one row per rung (its window, samples, SM and
  memory clocks, power, temperature, utilisation, clock-event reasons, output tok/s) and what the
  error counters grew by.
Exit status 1 when a result check mismatched, a greedy repeat differed or an outputs_differ flag was
raised (what issue 33 requires to be 0 on a healthy card).
"""
import argparse
import json
import sys


def checks(health):
    bad = 0
    print("| GPU | benchmark | results checked | mismatches | first mismatch | CPU tile |")
    print("|---|---|---|---|---|---|")
    for g in health.get("gpus", []):
        i = g["gpu"]["index"]
        rows = [(b["name"], b.get("check")) for b in g.get("bench", []) if "gemm" in b["name"]]
        if g.get("burn"):
            rows.append(("burn %s" % g["burn"].get("duration", ""), g["burn"].get("check")))
        for name, c in rows:
            if not c:
                print(f"| {i} | {name} | not checked | | | |")
                continue
            bad += c.get("mismatches", 0) + c.get("tile_mismatches", 0)
            first = "-" if c.get("first_mismatch_s") is None else "%.1f s" % c["first_mismatch_s"]
            print(f"| {i} | {name} | {c.get('checked', 0)} | {c.get('mismatches', 0)} | {first} | {c.get('tile', c.get('error', '-'))} |")
    return bad


def greedy(summary):
    bad = 0
    print("| model | GPU | basis | repeat | first tokens of prompt 0 | outputs differ |")
    print("|---|---|---|---|---|---|")
    for h in summary.get("hosts", []):
        for m in h.get("models", []):
            for ep in m.get("endpoints", []):
                g = (ep.get("functional") or {}).get("greedy")
                flags = [f["reason"] for f in ep.get("flags", []) if f["check"] == "judge.outputs_differ"]
                bad += len(flags)
                if not g:
                    print(f"| {m['model']} | {ep['gpus']} | not run | | | {'; '.join(flags) or '-'} |")
                    continue
                rd = g.get("repeat_diff")
                bad += rd is not None
                rep = "agrees" if rd is None else "differs at prompt %d, %s %d" % (rd["prompt"], rd["unit"], rd["position"])
                o = g["outputs"][0] if g.get("outputs") else {}
                first = o.get("token_ids", [])[:8] if g["basis"] == "token_ids" else repr(o.get("text", "")[:40])
                basis = g["basis"] + (" (" + g["basis_note"] + ")" if g.get("basis_note") else "")
                print(f"| {m['model']} | {ep['gpus']} | {basis} | {rep} | {first} | {'; '.join(flags) or '-'} |")
            for n in m.get("notes", []):
                if "greedy" in n:
                    print(f"\nnote: {n}")
    return bad


def telemetry(summary):
    for h in summary.get("hosts", []):
        for m in h.get("models", []):
            for ep in m.get("endpoints", []):
                t = ep.get("telemetry")
                if not t:
                    print(f"\n{m['model']} on {ep['gpus']}: no telemetry")
                    continue
                runs = (ep.get("load") or {}).get("runs", [])
                for g in t["gpus"]:
                    print(f"\n{m['model']}, GPU {g['gpu']} (source {t['source']}, every {t['interval_seconds']} s, "
                          f"{len(g.get('samples', []))} samples kept, stride {g.get('stride') or 1}); during the load: "
                          f"ECC uncorrected +{g.get('ecc_uncorrected_delta', '?')}, corrected +{g.get('ecc_corrected_delta', '?')}, "
                          f"PCIe replays +{g.get('pcie_replay_delta', '?')}, XIDs {len(g.get('xids') or [])}"
                          + (f" ({g['counters_note']})" if g.get("counters_note") else ""))
                    print("\n| rung | window s | samples | SM MHz mean/min | mem MHz | power W mean/max | max °C | util % | mem used MiB | reasons (share of samples) | output tok/s |")
                    print("|---|---|---|---|---|---|---|---|---|---|---|")
                    for r in g.get("rungs", []):
                        out = runs[r["rung"]]["output_tok_s"] if r["rung"] < len(runs) else float("nan")
                        rs = ", ".join("%s %.0f%%" % (k, 100 * v) for k, v in sorted((r.get("reason_share") or {}).items())) or "-"
                        print(f"| {r['rung'] + 1} {r['label']} | {r['start_s']:.1f}–{r['end_s']:.1f} | {r['samples']} | "
                              f"{r['sm_clock_mean_mhz']}/{r['sm_clock_min_mhz']} | {r.get('mem_clock_mean_mhz', '-')} | "
                              f"{r['power_mean_w']:.0f}/{r['power_max_w']:.0f} | {r['temp_max_c']} | {r['util_mean_pct']} | "
                              f"{r.get('mem_used_max_mib', '-')} | {rs} | {out:.0f} |")
                tel_flags = [f for f in ep.get("flags", []) if f["check"].startswith(("judge.throttled", "judge.clock_events", "judge.xid", "judge.ecc", "judge.pcie"))]
                for f in tel_flags:
                    print(f"\nflag [{f['check']}] {f['reason']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--health", help="health.json (gpuvet health --out)")
    ap.add_argument("--summary", help="summary.json of a gpuvet run")
    a = ap.parse_args()
    bad = 0
    if a.health:
        print("## Result checks (burn and GEMMs)\n")
        bad += checks(json.load(open(a.health)))
    if a.summary:
        s = json.load(open(a.summary))
        for h in s.get("hosts", []):
            if h.get("health") and not a.health:
                print("## Result checks (burn and GEMMs)\n")
                bad += checks(h["health"])
        print("\n## Greedy outputs\n")
        bad += greedy(s)
        print("\n## Telemetry under the load, rung by rung")
        telemetry(s)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
