#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tools/bench-llama-cpp.py - Loom's and llama.cpp's prefill and decode
# speed on the same GGUF files, side by side.  Not run by make check.
#
#   tools/bench-llama-cpp.py --llama-bench PATH [--presets small,7b-layer]
#       [--types f32,f16,bf16,q8_0] [--gguf FILE ...] [--threads 2]
#       [--rounds 5] [--prefill 128] [--decode 32]
#
# The files are the presets written by `loom-bench model --save` (and any
# --gguf FILE).  Each round runs `loom-bench model --gguf FILE` and
# `llama-bench -m FILE` once each, the order alternating round by round so
# that a machine growing busier or quieter weighs on both alike; the
# table gives the medians over the rounds and the ratio Loom/llama.cpp.
# Both decode after an empty context (loom-bench's decode follows its
# prefill, so Loom's figure carries a KV cache of --prefill tokens more).
# STREAM bandwidth, from loom-bench, frames the decode figures.  Then,
# per file, loom-run's load time against reading the file's (cached)
# bytes into memory, interleaved too, and loom-run's peak resident memory
# against the weights, KV cache and compute memory it reports.
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def use_build_tree(builddir):
    os.environ.setdefault("LOOM_PLUGIN_PATH", "%s/plugins/cpu/.libs:%s/"
                          "plugins/meta/.libs" % (builddir, builddir))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    return json.loads(out)


def loom_once(o, path):
    j = run_json([o.bench, "model", "--gguf", path, "--json", "--no-limits",
                  "--reps", "1", "--prefill", str(o.prefill), "--decode",
                  str(o.decode), "--threads", str(o.threads)])
    dev = j["devices"][0]
    return j["prefill_tok_s"][dev], j["decode_tok_s"][dev], j


def llama_once(o, path):
    j = run_json([o.llama_bench, "-m", path, "-p", str(o.prefill), "-n",
                  str(o.decode), "-t", str(o.threads), "-r", "1", "-o",
                  "json"])
    pp = [r["avg_ts"] for r in j if r["n_prompt"] and not r["n_gen"]]
    tg = [r["avg_ts"] for r in j if r["n_gen"] and not r["n_prompt"]]
    return pp[0], tg[0]


def copy_s(path):
    # The file's bytes read from the page cache into fresh memory.
    n = os.path.getsize(path)
    t = time.perf_counter()
    buf = bytearray(n)
    with open(path, "rb", buffering=0) as f:
        f.readinto(buf)
    return time.perf_counter() - t


def load_once(o, path):
    cmd = [os.path.join(o.builddir, "tools", "loom-run"), "-m", path,
           "--tokens", "1", "-n", "1", "--json", "--ctx", str(o.ctx),
           "--threads", str(o.threads)]
    # loom-run reports its own peak (VmHWM): a child's ru_maxrss would
    # count the memory this script had when it forked.
    j = run_json(cmd)
    return j, j["peak_rss_bytes"]


def load_table(o, files):
    head = "%-18s %9s %8s %8s %6s  %10s %10s %6s" % (
        "file", "MiB", "copy s", "load s", "ratio", "RSS MiB",
        "reported", "ratio")
    print()
    print(head)
    print("-" * len(head))
    for path in files:
        copies, loads, rss = [], [], []
        info = None
        for r in range(o.rounds):
            copy_s(path)  # the first read may fill the page cache
            steps = [lambda: copies.append(copy_s(path)),
                     lambda: loads.append(load_once(o, path))]
            if r % 2:
                steps.reverse()
            for f in steps:
                f()
        rss = [x[1] for x in loads]
        info = loads[-1][0]
        mc = statistics.median(copies)
        ml = statistics.median([x[0]["load_s"] for x in loads])
        rep = info["weight_bytes"] + info["cache_bytes"] + \
            info["compute_bytes"]
        print("%-18s %9.1f %8.3f %8.3f %6.2f  %10.1f %10.1f %6.2f" % (
            os.path.basename(path)[:-5], os.path.getsize(path) / 2**20, mc,
            ml, ml / mc, statistics.median(rss) / 2**20, rep / 2**20,
            statistics.median(rss) / rep), flush=True)


def stream_gbps(o):
    try:
        j = run_json([o.bench, "stream", "--json", "--threads",
                      str(o.threads)])
        return j.get("stream_gbps")
    except (subprocess.CalledProcessError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--presets", default="small")
    ap.add_argument("--types", default="f32,f16,bf16,q8_0")
    ap.add_argument("--gguf", action="append", default=[])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512,
                    help="loom-run's KV cache length for the load table")
    ap.add_argument("--no-load", action="store_true",
                    help="skip the load-time and memory table")
    o = ap.parse_args()
    use_build_tree(o.builddir)
    o.bench = os.path.join(o.builddir, "tools", "loom-bench")
    tmp = tempfile.TemporaryDirectory()
    files = list(o.gguf)
    for preset in o.presets.split(","):
        for t in o.types.split(","):
            if not preset or not t:
                continue
            path = os.path.join(tmp.name, "%s-%s.gguf" % (preset, t))
            subprocess.run([o.bench, "model", "--preset", preset, "--type",
                            t, "--save", path], check=True,
                           stderr=subprocess.DEVNULL)
            files.append(path)
    bw = stream_gbps(o)
    print("%d threads, prefill %d, decode %d tokens, %d rounds (medians)%s"
          % (o.threads, o.prefill, o.decode, o.rounds,
             ", STREAM %.1f GB/s" % bw if bw else ""))
    head = ("%-18s %9s %9s %6s   %9s %9s %6s  %8s" %
            ("file", "prefill", "llama.cpp", "ratio", "decode",
             "llama.cpp", "ratio", "GB/s"))
    print(head)
    print("-" * len(head))
    for path in files:
        lp, ld, ll_p, ll_d = [], [], [], []
        info = None
        for r in range(o.rounds):
            runs = [lambda: loom_once(o, path), lambda: llama_once(o, path)]
            if r % 2:
                runs.reverse()
            for f in runs:
                res = f()
                if len(res) == 3:
                    lp.append(res[0])
                    ld.append(res[1])
                    info = res[2]
                else:
                    ll_p.append(res[0])
                    ll_d.append(res[1])
        mp, md = statistics.median(lp), statistics.median(ld)
        qp, qd = statistics.median(ll_p), statistics.median(ll_d)
        gbps = md * info["decode_bytes_per_token"] / 1e9
        print("%-18s %9.1f %9.1f %6.2f   %9.2f %9.2f %6.2f  %8.1f" % (
            os.path.basename(path)[:-5], mp, qp, mp / qp, md, qd, md / qd,
            gbps), flush=True)
    if not o.no_load:
        load_table(o, files)
    tmp.cleanup()
    return 0


sys.exit(main())
