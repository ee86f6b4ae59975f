#!/usr/bin/env python3
# tools/compare-llama-cpp.py - Loom against llama.cpp on the same GGUF
# files: the prompt's token ids and the logits of every prompt position
# (NMSE), through llama-cpp-python (pip install llama-cpp-python builds
# llama.cpp).  Not run by make check.
#
#   tools/compare-llama-cpp.py                    # synthetic files, each type
#   tools/compare-llama-cpp.py -m model.gguf -p "Hello, world"
#
# Without -m it writes the `tiny` and `small` presets in f32, f16, bf16
# and q8_0 with `loom-bench model --save` and checks each; the limits are
# those of the issue: NMSE <= 1e-4 for f32/f16/bf16, 1e-3 for q8_0.
import argparse
import json
import os
import subprocess
import sys
import tempfile

LIMITS = {"f32": 1e-4, "f16": 1e-4, "bf16": 1e-4, "q8_0": 1e-3}


def loom(builddir, model, args, dump):
    env = dict(os.environ)
    env.setdefault("LOOM_PLUGIN_PATH", "%s/plugins/cpu/.libs:%s/plugins/"
                   "meta/.libs" % (builddir, builddir))
    cmd = [os.path.join(builddir, "tools", "loom-run"), "-m", model, "-n",
           "1", "--json", "--cache-type", "f32", "--dump-logits", dump]
    out = subprocess.run(cmd + args, env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def nmse(ref, x):
    num = sum((float(a) - float(b)) ** 2 for a, b in zip(ref, x))
    den = sum(float(a) ** 2 for a in ref)
    return num / den if den else num


def compare(builddir, model, text, tokens, threads):
    import numpy as np
    from llama_cpp import Llama

    args = ["--tokens", ",".join(map(str, tokens))] if tokens else [
        "-p", text]
    if threads:
        args += ["--threads", str(threads)]
    with tempfile.NamedTemporaryFile(suffix=".f32") as dump:
        run = loom(builddir, model, args, dump.name)
        got = np.fromfile(dump.name, dtype="<f4")
    ids = run["prompt_tokens"]
    # An F32 cache on both sides (type 0 is F32 in ggml's numbering).
    llm = Llama(model_path=model, n_ctx=max(64, len(ids) + 8),
                logits_all=True, n_threads=threads or None, type_k=0,
                type_v=0, verbose=False)
    same_ids = None
    if not tokens:
        ref_ids = llm.tokenize(text.encode(), add_bos=True, special=False)
        same_ids = list(ref_ids) == list(ids)
        if not same_ids:
            print("  token ids differ:\n    llama.cpp %s\n    loom      %s"
                  % (list(ref_ids), ids))
    llm.eval(ids)
    nv = llm.n_vocab()
    ref = np.array(llm.scores[:len(ids)], dtype=np.float64).reshape(-1)
    got = got.astype(np.float64)[:len(ids) * nv]
    return nmse(ref, got), same_ids, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model")
    ap.add_argument("-p", "--prompt", default="Hello, world! 123 café 🙂")
    ap.add_argument("--tokens", help="ids instead of -p")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--limit", type=float, default=1e-4)
    o = ap.parse_args()
    tokens = [int(t) for t in o.tokens.split(",")] if o.tokens else None
    failed = 0
    if o.model:
        cases = [(o.model, o.limit)]
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory()
        cases = []
        bench = os.path.join(o.builddir, "tools", "loom-bench")
        for preset in ("tiny", "small"):
            for t in LIMITS:
                path = os.path.join(tmp.name, "%s-%s.gguf" % (preset, t))
                subprocess.run([bench, "model", "--preset", preset,
                                "--type", t, "--save", path], check=True,
                               stderr=subprocess.DEVNULL)
                cases.append((path, LIMITS[t]))
    for path, limit in cases:
        e, same, run = compare(o.builddir, path, o.prompt, tokens,
                               o.threads)
        ok = e <= limit and same is not False
        failed += not ok
        print("%-28s %-6s %3d tokens  nmse %.3g (<= %.0e)%s  %s" % (
            os.path.basename(path), run["arch"], run["n_prompt"], e, limit,
            "" if same is None else "  ids %s" % ("same" if same else
                                                  "DIFFER"),
            "ok" if ok else "FAIL"))
    if tmp:
        tmp.cleanup()
    return 1 if failed else 0


sys.exit(main())
