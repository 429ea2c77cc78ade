#!/usr/bin/env python3
"""Reads a transformers-front engine log (and, optionally, gpuvet's records.jsonl of the same load)
and says what ended each request the client called short, with the counts the issue-41 hypothesis
turns on:

  check_short_outputs.py ENGINE.log [RAW.records.jsonl]

- requests that asked for ignore_eos and ended with fewer tokens than max_tokens (finish=stop):
  what an old front did at an EOS the model made (none expected from a fixed front);
- requests whose EOS the fixed front streamed past (eos_tokens>0): each one would have been a
  short output before the fix;
- cancelled requests (the client went away) and those whose client went away after the engine had
  finished them (client_gone, not cancelled: the case that made transformers log
  "CacheAllocator … attempted to free blocks for non-existent request_id");
- the CacheAllocator warnings themselves;
- with the records: gpuvet's short_output requests, by rung, with what came back.
"""

import collections
import json
import re
import sys

DONE = re.compile(r"gpuvet-front done id=(\S+) prompt_tokens=(\d+) output_tokens=(\d+) .*?finish=(\S+)"
                  r"(?: max_tokens=(\d+) ignore_eos=(\d) (?:eos_tokens=(\d+))?)?")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    finishes = collections.Counter()
    short_stop, eos_past, freed_twice, old_stop = [], [], 0, []
    with open(argv[1], errors="replace") as f:
        for line in f:
            if "attempted to free blocks for non-existent request_id" in line:
                freed_twice += 1
            m = DONE.search(line)
            if not m:
                continue
            rid, _, out, finish, mx, ign, eos = m.groups()
            finishes[finish] += 1
            if mx is None and finish == "stop":
                old_stop.append((rid, int(out)))  # a front before the fix logged no max_tokens
            if mx is not None and ign == "1" and finish == "stop" and int(out) < int(mx):
                short_stop.append((rid, int(out), int(mx)))
            if eos and int(eos) > 0:
                eos_past.append((rid, int(eos)))
    print(f"requests by finish: {dict(finishes)}")
    print(f"ignore_eos requests ended short with finish=stop: {len(short_stop)}")
    for rid, out, mx in short_stop[:10]:
        print(f"  {rid}: {out} of {mx} tokens")
    if old_stop:
        print(f"finish=stop lines of a front before the fix (no max_tokens logged; with ignore_eos each is an EOS cut): {len(old_stop)}")
        for rid, out in old_stop[:10]:
            print(f"  {rid}: {out} tokens")
    print(f"requests whose EOS the front streamed past (eos_tokens>0): {len(eos_past)}")
    for rid, n in eos_past[:10]:
        print(f"  {rid}: {n} EOS token(s)")
    print(f"CacheAllocator 'non-existent request_id' warnings: {freed_twice}")
    if len(argv) > 2:
        short = []
        with open(argv[2]) as f:
            for line in f:
                r = json.loads(line)
                if r.get("error") == "short_output":
                    short.append(r)
        print(f"gpuvet short_output records: {len(short)}")
        for r in short[:10]:
            print(f"  rung {r.get('rung')} #{r.get('index')}: {r.get('output_tokens')} of {r.get('requested_tokens')} tokens, "
                  f"ended {r.get('end_ms', 0) / 1000:.1f} s into the load")


if __name__ == "__main__":
    main(sys.argv)
