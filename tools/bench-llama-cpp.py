#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tools/bench-llama-cpp.py - Loom's and llama.cpp's speed side by side:
# prefill and decode on the same GGUF files, or (--kernels) the GEMM and
# GEMV shapes of `loom-bench gemm` and `loom-bench gemv`.  Not run by
# make check.
#
#   tools/bench-llama-cpp.py --llama-bench PATH [--presets small,7b-layer]
#       [--types f32,f16,bf16,q8_0] [--gguf FILE ...] [--threads 2]
#       [--rounds 5] [--prefill 128] [--decode 32] [--busy N]
#       [--omp-passive] [--markdown]
#   tools/bench-llama-cpp.py --kernels --llama-cpp DIR [--sizes 2048,4096]
#       [--types f32,q8_0,q4_0,q4_k] [--k 4096] [--rows M] [--reps 5]
#       [--rounds 3] [--threads 2] [--markdown]
#
# The files are the presets written by `loom-bench model --save` (and any
# --gguf FILE).  Each round runs `loom-bench model --gguf FILE` and
# `llama-bench -m FILE` once each, the order alternating round by round so
# that a machine growing busier or quieter weighs on both alike; the
# table gives the medians over the rounds and the ratio Loom/llama.cpp.
# Both decode with --prefill tokens already in the KV cache (llama-bench
# -d), as loom-bench's decode follows its prefill.
# STREAM bandwidth, from loom-bench, frames the decode figures.  --busy N
# runs the models under N processes that busy loop (a machine shared with
# other work), --omp-passive llama-bench with OpenMP's threads sleeping
# rather than spinning while they wait.  Then,
# per file, loom-run's load time against reading the file's (cached)
# bytes into memory, interleaved too, and loom-run's peak resident memory
# against the weights, KV cache and compute memory it reports.
#
# --kernels compiles tools/ggml-matmul.c against the llama.cpp source tree
# DIR (its ggml/include and the shared libraries in DIR/build/bin) and,
# in the same alternating rounds, times one mul_mat per type and shape
# through ggml's CPU backend and through `loom-bench gemm` (m = n = k
# from --sizes, GFLOP/s) or `loom-bench gemv` (k = --k, m as loom-bench
# picks it or --rows, GB/s of weight bytes).  ggml's weights sit where
# llama.cpp would put them: the table names the buffer and, where ggml
# repacked them into interleaved rows, the layout.
#
# --markdown ends with the same figures as a table in the form of
# doc/benchmarks.md, ready to paste there.
import argparse
import json
import os
import shlex
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


def interleaved(rounds, steps):
    # Each step once per round, the order reversed every other round
    # (round 0 runs them as given); one list of results per step.
    res = [[] for _ in steps]
    for r in range(rounds):
        order = list(range(len(steps)))
        if r % 2:
            order.reverse()
        for i in order:
            res[i].append(steps[i]())
    return res


def loom_once(o, path):
    j = run_json([o.bench, "model", "--gguf", path, "--json", "--no-limits",
                  "--reps", "1", "--prefill", str(o.prefill), "--decode",
                  str(o.decode), "--threads", str(o.threads)])
    dev = j["devices"][0]
    return j["prefill_tok_s"][dev], j["decode_tok_s"][dev], j


def llama_once(o, path):
    # Prefill from an empty context; decode after --prefill tokens in the
    # KV cache (-d), as loom-bench decodes after its prefill.
    if o.omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    base = [o.llama_bench, "-m", path, "-t", str(o.threads), "-r", "1",
            "-o", "json"]
    pp = run_json(base + ["-p", str(o.prefill), "-n", "0"])
    tg = run_json(base + ["-p", "0", "-n", str(o.decode), "-d",
                          str(o.prefill)])
    return pp[0]["avg_ts"], tg[0]["avg_ts"]


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


KERNEL_TYPES = "f32,f16,bf16,q8_0,q4_0,q4_k,q5_k,q6_k"


def build_matmul(o, outdir):
    # tools/ggml-matmul.c against the tree's ggml headers and shared
    # libraries, found again at run time through an rpath.
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "ggml-matmul.c")
    inc = os.path.join(o.llama_cpp, "ggml", "include")
    lib = os.path.join(o.llama_cpp, "build", "bin")
    if not os.path.exists(os.path.join(lib, "libggml-cpu.so")):
        sys.exit("bench-llama-cpp: no libggml-cpu.so in %s (build "
                 "llama.cpp with -DBUILD_SHARED_LIBS=ON)" % lib)
    exe = os.path.join(outdir, "ggml-matmul")
    cc = shlex.split(os.environ.get("CC", "cc"))
    subprocess.run(cc + ["-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
                         "-I", inc, src, "-o", exe, "-L", lib,
                         "-Wl,-rpath," + lib, "-lggml", "-lggml-cpu",
                         "-lggml-base", "-lm"], check=True)
    return exe


def llama_cpp_rev(o):
    try:
        return subprocess.run(["git", "-C", o.llama_cpp, "rev-parse",
                               "--short", "HEAD"], check=True, text=True,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def loom_args(o):
    return ["--json", "--no-limits", "--reps", str(o.reps), "--threads",
            str(o.threads)]


def loom_gemm(o, t, s):
    j = run_json([o.bench, "gemm", "--type", t, "--size", str(s)] +
                 loom_args(o))
    return j["gflops"]


def loom_gemv(o, t):
    cmd = [o.bench, "gemv", "--type", t, "--size", str(o.k)] + loom_args(o)
    if o.rows:
        cmd += ["--rows", str(o.rows)]
    return run_json(cmd)["types"][0]


def ggml_mm(o, t, m, n, k):
    return run_json([o.matmul, "-t", str(o.threads), "-r", str(o.reps), t,
                     str(m), str(n), str(k)])


def kernel_row(op, t, shape, unit, lo, gg, key):
    g = gg[-1]
    where = g["buffer"] + (" " + g["layout"] if g["layout"] else "")
    ml = statistics.median(lo)
    mg = statistics.median([x[key] for x in gg])
    print("%-4s %-5s %-16s %-7s %8.1f %9.1f %6.2f  %-20s %8.1e" % (
        op, t, shape, unit, ml, mg, ml / mg, where, g["check_nmse"]),
        flush=True)
    return g, ml, mg


def fig(x):
    # Three significant digits, as the tables of doc/benchmarks.md have.
    return "%.3g" % x if x < 1000 else "%.0f" % x


def kernels_markdown(rows, bw):
    # One row per type: GEMM at the first size (the ratios at the other
    # sizes in brackets), then GEMV and its share of STREAM read.
    print()
    print("| type | GEMM GFLOP/s Loom / llama.cpp | ratio | GEMV GB/s Loom "
          "/ llama.cpp | ratio | GEMV share of STREAM |")
    print("| --- | --- | --- | --- | --- | --- |")
    for t, gemm, gemv in rows:
        more = " (%s)" % ", ".join("%.2f" % (l / g) for l, g in gemm[1:]) \
            if len(gemm) > 1 else ""
        gemm_cells = ("%s / %s | %.2f%s" % (fig(gemm[0][0]), fig(gemm[0][1]),
                                            gemm[0][0] / gemm[0][1], more)
                      if gemm else "- | -")
        print("| %s | %s | %s / %s | %.2f | %s |" % (
            t.upper(), gemm_cells, fig(gemv[0]), fig(gemv[1]),
            gemv[0] / gemv[1], "%.0f%%" % (100 * gemv[0] / bw) if bw else "-"))


def kernels(o):
    tmp = tempfile.TemporaryDirectory()
    o.matmul = build_matmul(o, tmp.name)
    sizes = [int(x) for x in o.sizes.split(",") if x]
    rev = llama_cpp_rev(o)
    bw = stream_gbps(o)
    print("%d threads, %d reps per run, %d rounds (medians), llama.cpp%s%s"
          % (o.threads, o.reps, o.rounds, " " + rev if rev else "",
             ", STREAM %.1f GB/s" % bw if bw else ""))
    head = ("%-4s %-5s %-16s %-7s %8s %9s %6s  %-20s %8s" %
            ("op", "type", "m x n x k", "unit", "Loom", "llama.cpp",
             "ratio", "llama.cpp weights", "check"))
    print(head)
    print("-" * len(head))
    g = None
    rows = []
    for t in o.types.split(","):
        gemm = []
        for s in sizes:
            lo, gg = interleaved(o.rounds, [lambda: loom_gemm(o, t, s),
                                            lambda: ggml_mm(o, t, s, s, s)])
            g, ml, mg = kernel_row("GEMM", t, "%dx%dx%d" % (s, s, s),
                                   "GFLOP/s", lo, gg, "gflops")
            gemm.append((ml, mg))
        # Loom picks m in round 0's first step, before ggml's first run.
        lv = []
        lo, gg = interleaved(o.rounds, [
            lambda: lv.append(loom_gemv(o, t)) or lv[-1]["gbps"],
            lambda: ggml_mm(o, t, lv[0]["m"], 1, o.k)])
        if gg[-1]["weight_bytes"] != lv[0]["bytes"]:
            print("warning: %s weights of %d bytes in Loom, %d in ggml" %
                  (t, lv[0]["bytes"], gg[-1]["weight_bytes"]))
        g, ml, mg = kernel_row("GEMV", t, "%dx1x%d" % (lv[0]["m"], o.k),
                               "GB/s", lo, gg, "gbps")
        rows.append((t, gemm, (ml, mg)))
    if g:
        print("ggml CPU features: %s" % g["features"])
    if o.markdown:
        kernels_markdown(rows, bw)
    tmp.cleanup()
    return 0


def busy(n):
    # n processes that keep a core each busy until killed.
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(n)]


def file_label(path):
    # small-q4_k.gguf, as the presets are saved: "small Q4_K".
    name = os.path.basename(path)[:-5]
    preset, _, t = name.rpartition("-")
    return "%s %s" % (preset, t.upper()) if preset else name


def models_markdown(rows):
    print()
    print("| file | prefill tok/s Loom / llama.cpp | ratio | decode tok/s "
          "Loom / llama.cpp | ratio | Loom decode GB/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path, mp, qp, md, qd, gbps in rows:
        print("| %s | %s / %s | %.2f | %s / %s | %.2f | %.1f |" % (
            file_label(path), fig(mp), fig(qp), mp / qp, fig(md), fig(qd),
            md / qd, gbps))


def models(o):
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
    if o.busy:
        print("under %d busy processes%s" % (o.busy, "; llama.cpp with "
              "OMP_WAIT_POLICY=PASSIVE" if o.omp_passive else ""))
    load = busy(o.busy)
    head = ("%-18s %9s %9s %6s   %9s %9s %6s  %8s" %
            ("file", "prefill", "llama.cpp", "ratio", "decode",
             "llama.cpp", "ratio", "GB/s"))
    print(head)
    print("-" * len(head))
    rows = []
    for path in files:
        lo, ll = interleaved(o.rounds, [lambda: loom_once(o, path),
                                        lambda: llama_once(o, path)])
        info = lo[-1][2]
        mp = statistics.median([x[0] for x in lo])
        md = statistics.median([x[1] for x in lo])
        qp = statistics.median([x[0] for x in ll])
        qd = statistics.median([x[1] for x in ll])
        gbps = md * info["decode_bytes_per_token"] / 1e9
        print("%-18s %9.1f %9.1f %6.2f   %9.2f %9.2f %6.2f  %8.1f" % (
            os.path.basename(path)[:-5], mp, qp, mp / qp, md, qd, md / qd,
            gbps), flush=True)
        rows.append((path, mp, qp, md, qd, gbps))
    for p in load:
        p.kill()
        p.wait()
    if o.markdown:
        models_markdown(rows)
    if not o.no_load:
        load_table(o, files)
    tmp.cleanup()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--llama-bench",
                    help="default: DIR/build/bin/llama-bench of --llama-cpp")
    ap.add_argument("--llama-cpp", metavar="DIR",
                    help="llama.cpp's source tree, built in DIR/build")
    ap.add_argument("--kernels", action="store_true",
                    help="GEMM and GEMV through ggml instead of models")
    ap.add_argument("--presets", default="small")
    ap.add_argument("--types", help="default: f32,f16,bf16,q8_0; "
                    "--kernels: " + KERNEL_TYPES)
    ap.add_argument("--gguf", action="append", default=[])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int,
                    help="default: 5; --kernels: 3")
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512,
                    help="loom-run's KV cache length for the load table")
    ap.add_argument("--no-load", action="store_true",
                    help="skip the load-time and memory table")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="models: run under N processes busy looping")
    ap.add_argument("--omp-passive", action="store_true",
                    help="models: llama-bench with OMP_WAIT_POLICY=PASSIVE")
    ap.add_argument("--sizes", default="2048,4096",
                    help="--kernels: GEMM m = n = k")
    ap.add_argument("--k", type=int, default=4096, help="--kernels: GEMV k")
    ap.add_argument("--rows", type=int,
                    help="--kernels: GEMV m (default: loom-bench's)")
    ap.add_argument("--reps", type=int, default=5,
                    help="--kernels: timed runs per process")
    ap.add_argument("--markdown", action="store_true",
                    help="end with the table in doc/benchmarks.md's form")
    o = ap.parse_args()
    if o.kernels and not o.llama_cpp:
        ap.error("--kernels needs --llama-cpp DIR")
    if not o.kernels and not o.llama_bench:
        if not o.llama_cpp:
            ap.error("--llama-bench PATH or --llama-cpp DIR is required")
        o.llama_bench = os.path.join(o.llama_cpp, "build", "bin",
                                     "llama-bench")
    if o.rounds is None:
        o.rounds = 3 if o.kernels else 5
    if o.types is None:
        o.types = KERNEL_TYPES if o.kernels else "f32,f16,bf16,q8_0"
    use_build_tree(o.builddir)
    o.bench = os.path.join(o.builddir, "tools", "loom-bench")
    return kernels(o) if o.kernels else models(o)


sys.exit(main())
