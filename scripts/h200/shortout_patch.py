#!/usr/bin/env python3
"""Adds diagnostic log lines to a copy of gpuvet's transformers front (issue 41's short outputs):
every submit (id, max_new_tokens, ignore_eos), every EOS token the front sees, and every finish the
engine reports (tokens generated, status, error). Usage: shortout_patch.py /tmp/front.py"""
import sys

p = sys.argv[1]
s = open(p).read()
edits = [
    ('        kwargs = {"request_id": rid, "max_new_tokens": max_new_tokens, "streaming": True}\n',
     '        kwargs = {"request_id": rid, "max_new_tokens": max_new_tokens, "streaming": True}\n'
     '        LOG.warning("gpuvet-diag submit id=%s max=%d ignore_eos=%s prompt=%d", rid, max_new_tokens, ignore_eos, len(ids))\n'),
    ('                if finished or error:\n                    self.callbacks.pop(out.request_id, None)\n',
     '                if finished or error:\n                    self.callbacks.pop(out.request_id, None)\n'
     '                    LOG.warning("gpuvet-diag fin id=%s toks=%d status=%s error=%s", out.request_id, len(toks), getattr(out, "status", "?"), error)\n'),
    ('                if t == self.gen.eos:\n',
     '                if t == self.gen.eos:\n'
     '                    LOG.warning("gpuvet-diag eos id=%s n=%d max=%d", state["rid"], state["n"], max_new)\n'),
]
for old, new in edits:
    if s.count(old) != 1:
        sys.exit(f"patch point not found once: {old!r}")
    s = s.replace(old, new)
open(p, "w").write(s)
print("patched", p)
