#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# tools/compare-llama-cpp.py - Loom against llama.cpp on the same GGUF
# files: the prompt's token ids and the logits of every prompt position
# (NMSE), through llama-cpp-python.  Not run by make check.
#
#   tools/compare-llama-cpp.py                    # synthetic files, each type
#   tools/compare-llama-cpp.py -m model.gguf -p "Hello, world"
#   tools/compare-llama-cpp.py --vocab-dir DIR [--quantize llama-quantize]
#   ... --markdown      # ends with the NMSE table of doc/accuracy.md
#   ... --no-repack     # llama.cpp without its AMX or repacked layouts
#
# Without -m it writes the `tiny` and `small` presets in f32, f16, bf16,
# q8_0, q4_0, q4_k, q5_k and q6_k with `loom-bench model --save` and
# checks each.  --vocab-dir names a directory of vocabulary-only GGUF
# files (llama.cpp's models/ has them: ggml-vocab-llama-spm.gguf, ...):
# for each architecture Loom runs, a model of random weights is written
# around a real vocabulary (with the gguf package) in f32, f16, bf16, q8_0
# and q4_0, and --quantize (llama.cpp's llama-quantize) adds the file's
# f32 model quantized by llama.cpp to Q4_K_M, Q5_K_M and Q6_K.  Limits:
# NMSE <= 1e-4 for f32/f16/bf16, 1e-3 for q8_0, 1e-2 for 4-6 bit types.
#
# Needs numpy, gguf and llama_cpp (pip install llama-cpp-python, or its
# Python package with LLAMA_CPP_LIB_PATH naming a built libllama).
import argparse
import json
import os
import subprocess
import sys
import tempfile

LIMITS = {"f32": 1e-4, "f16": 1e-4, "bf16": 1e-4, "q8_0": 1e-3,
          "q4_0": 1e-2, "q4_k": 1e-2, "q5_k": 1e-2, "q6_k": 1e-2,
          "Q4_K_M": 1e-2, "Q5_K_M": 1e-2, "Q6_K": 1e-2}

# Architecture, vocabulary file, the keys that differ.
MODELS = [
    ("llama", "ggml-vocab-llama-spm.gguf", {}),
    ("llama", "ggml-vocab-llama-bpe.gguf", {"rope_freqs": True}),
    ("qwen2", "ggml-vocab-qwen2.gguf", {"bias": True, "tied": True}),
    ("qwen3", "ggml-vocab-qwen2.gguf", {"qk_norm": True, "tied": True}),
    ("qwen3moe", "ggml-vocab-qwen2.gguf", {"qk_norm": True, "moe": True}),
    ("gemma3", "ggml-vocab-llama-spm.gguf", {"qk_norm": True, "tied": True,
                                             "gemma": True}),
    ("xverse", "ggml-vocab-llama-spm.gguf", {}),
    ("exaone", "ggml-vocab-llama-spm.gguf", {"rope_freqs": True}),
    ("phi3", "ggml-vocab-phi-3.gguf", {"fused": True}),
    ("internlm2", "ggml-vocab-llama-spm.gguf", {}),
    ("mistral3", "ggml-vocab-llama-bpe.gguf", {"rope_freqs": True}),
    ("gpt-oss", "ggml-vocab-llama-bpe.gguf", {"bias": True, "moe": True,
                                              "oai": True}),
]

# Special tokens' texts are tokens on both sides (as llama.cpp's tools
# and loom-run take a prompt): <s> in SentencePiece vocabularies,
# <|im_start|> in Qwen's.
PROMPT = ("<|im_start|>user\nHello, world! 123 4567 café 🙂 Äpfel<s>\n"
          "\tdef f(x):\n        return x ** 2  # 🦙.cpp<|im_end|>")


def use_build_tree(builddir):
    # The plugins of the build tree, unless the caller chose others.
    os.environ.setdefault("LOOM_PLUGIN_PATH", "%s/plugins/cpu/.libs:%s/"
                          "plugins/meta/.libs" % (builddir, builddir))


def loom(builddir, model, args, dump):
    cmd = [os.path.join(builddir, "tools", "loom-run"), "-m", model, "-n",
           "1", "--json", "--cache-type", "f32", "--dump-logits", dump]
    out = subprocess.run(cmd + args, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def nmse(ref, x):
    import numpy as np

    den = float(np.sum(ref * ref))
    num = float(np.sum((ref - x) ** 2))
    return num / den if den else num


def nmse_without(per_pos, out):
    rest = [x for i, x in enumerate(per_pos) if i not in out]
    return max(rest) if rest else 0.0


def plain_buffers():
    # llama.cpp's weights in its CPU buffers, none repacked for its extra
    # kernels (its AMX ones crashed on quantized weights).
    import llama_cpp.llama_cpp as lc

    default = lc.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p
    lc.llama_model_default_params = params


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
        ref_ids = llm.tokenize(text.encode(), add_bos=True, special=True)
        same_ids = list(ref_ids) == list(ids)
        if not same_ids:
            print("  token ids differ:\n    llama.cpp %s\n    loom      %s"
                  % (list(ref_ids), ids))
    llm.eval(ids)
    nv = llm.n_vocab()
    ref = np.array(llm.scores[:len(ids)], dtype=np.float64)
    got = got.astype(np.float64)[:len(ids) * nv].reshape(len(ids), nv)
    per_pos = [nmse(ref[i], got[i]) for i in range(len(ids))]
    return nmse(ref, got), per_pos, same_ids, run


def copy_tokenizer(writer, vocab_path):
    import gguf

    r = gguf.GGUFReader(vocab_path)
    for name, f in r.fields.items():
        if not name.startswith("tokenizer.") or name == \
                "tokenizer.chat_template":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, f.contents(), f.types[0],
                                 sub_type=f.types[-1])
        else:
            writer.add_key_value(name, f.contents(), f.types[0])
    return len(r.fields["tokenizer.ggml.tokens"].data)


def write_model(path, arch, vocab_path, wtype, opts, seed=1):
    """A model of random weights around vocab_path's tokenizer: 2 layers,
    embedding 256, 4 query heads over 2 KV heads of 64, FFN 512 (4
    experts of which 2 are used for qwen3moe), wtype for the matrices.
    gemma3's layer 0 sees a window of 16 tokens, layer 1 them all; phi3
    has q, k, v in one attn_qkv and gate then up in one ffn_up; gpt-oss
    slides as gemma3 does, with YaRN (factor 32 over 4096 positions),
    attention sinks, an output bias, post_attention_norm before the
    experts, and biases on the router and the experts."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    n_embd, n_head, n_kv, hd, n_ff, n_layer = 256, 4, 2, 64, 512, 2
    n_exp, n_used = 4, 2
    w = gguf.GGUFWriter(path, arch)
    n_vocab = copy_tokenizer(w, vocab_path)
    w.add_uint32("%s.context_length" % arch, 4096)
    w.add_uint32("%s.embedding_length" % arch, n_embd)
    w.add_uint32("%s.block_count" % arch, n_layer)
    w.add_uint32("%s.attention.head_count" % arch, n_head)
    w.add_uint32("%s.attention.head_count_kv" % arch, n_kv)
    w.add_uint32("%s.attention.key_length" % arch, hd)
    w.add_uint32("%s.attention.value_length" % arch, hd)
    w.add_uint32("%s.rope.dimension_count" % arch, hd)
    w.add_float32("%s.rope.freq_base" % arch, 10000.0)
    w.add_float32("%s.attention.layer_norm_rms_epsilon" % arch, 1e-6)
    w.add_uint32("%s.vocab_size" % arch, n_vocab)
    if opts.get("moe"):
        w.add_uint32("%s.expert_count" % arch, n_exp)
        w.add_uint32("%s.expert_used_count" % arch, n_used)
        w.add_uint32("%s.expert_feed_forward_length" % arch, n_ff)
    else:
        w.add_uint32("%s.feed_forward_length" % arch, n_ff)
    if opts.get("oai"):
        w.add_uint32("%s.attention.sliding_window" % arch, 16)
        w.add_string("%s.rope.scaling.type" % arch, "yarn")
        w.add_float32("%s.rope.scaling.factor" % arch, 32.0)
        w.add_uint32("%s.rope.scaling.original_context_length" % arch, 4096)
    if opts.get("gemma"):
        w.add_uint32("%s.attention.sliding_window" % arch, 16)
        w.add_uint32("%s.attention.sliding_window_pattern" % arch, 2)
        w.add_float32("%s.rope.freq_base_swa" % arch, 5000.0)
    qt = {"f32": gguf.GGMLQuantizationType.F32,
          "f16": gguf.GGMLQuantizationType.F16,
          "bf16": gguf.GGMLQuantizationType.BF16,
          "q8_0": gguf.GGMLQuantizationType.Q8_0,
          "q4_0": gguf.GGMLQuantizationType.Q4_0}[wtype]

    def mat(name, *shape, quant=True, gain=1.0):
        # numpy shape (rows, row length): GGUF's [row length, rows].
        x = (gain * rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(
            np.float32)
        if not quant or qt == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, x)
        elif qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qt), raw_dtype=qt)

    def vec(name, n, base=1.0):
        w.add_tensor(name, (base + 0.1 * rng.standard_normal(n)).astype(
            np.float32))

    mat("token_embd.weight", n_vocab, n_embd)
    vec("output_norm.weight", n_embd)
    if not opts.get("tied"):
        mat("output.weight", n_vocab, n_embd)
    if opts.get("rope_freqs"):
        # Llama 3's per-frequency factors: 1 for the high frequencies,
        # growing towards the low ones.
        f = np.linspace(1.0, 8.0, hd // 2).astype(np.float32)
        w.add_tensor("rope_freqs.weight", f)
    for i in range(n_layer):
        b = "blk.%d." % i
        vec(b + "attn_norm.weight", n_embd)
        if opts.get("fused"):
            mat(b + "attn_qkv.weight", (n_head + 2 * n_kv) * hd, n_embd)
        else:
            mat(b + "attn_q.weight", n_head * hd, n_embd)
            mat(b + "attn_k.weight", n_kv * hd, n_embd)
            mat(b + "attn_v.weight", n_kv * hd, n_embd)
        mat(b + "attn_output.weight", n_embd, n_head * hd)
        if opts.get("oai"):
            vec(b + "attn_output.bias", n_embd, 0.0)
            w.add_tensor(b + "attn_sinks.weight",
                         rng.standard_normal(n_head).astype(np.float32))
        if opts.get("bias"):
            vec(b + "attn_q.bias", n_head * hd, 0.0)
            vec(b + "attn_k.bias", n_kv * hd, 0.0)
            vec(b + "attn_v.bias", n_kv * hd, 0.0)
        if opts.get("qk_norm"):
            vec(b + "attn_q_norm.weight", hd)
            vec(b + "attn_k_norm.weight", hd)
        if opts.get("oai"):
            vec(b + "post_attention_norm.weight", n_embd)
        else:
            vec(b + "ffn_norm.weight", n_embd)
        if opts.get("gemma"):
            vec(b + "post_attention_norm.weight", n_embd)
            vec(b + "post_ffw_norm.weight", n_embd)
        if opts.get("moe"):
            # A decisive router: random routers of unit gain leave the
            # top two experts so close that the two sides' rounding
            # picks differently at some positions.
            mat(b + "ffn_gate_inp.weight", n_exp, n_embd, quant=False,
                gain=8.0)
            mat(b + "ffn_gate_exps.weight", n_exp, n_ff, n_embd)
            mat(b + "ffn_up_exps.weight", n_exp, n_ff, n_embd)
            mat(b + "ffn_down_exps.weight", n_exp, n_embd, n_ff)
            if opts.get("oai"):
                vec(b + "ffn_gate_inp.bias", n_exp, 0.0)
                for e in ("gate", "up"):
                    w.add_tensor(b + "ffn_%s_exps.bias" % e, (
                        0.1 * rng.standard_normal((n_exp, n_ff))).astype(
                        np.float32))
                w.add_tensor(b + "ffn_down_exps.bias", (
                    0.1 * rng.standard_normal((n_exp, n_embd))).astype(
                    np.float32))
        elif opts.get("fused"):
            mat(b + "ffn_up.weight", 2 * n_ff, n_embd)
            mat(b + "ffn_down.weight", n_embd, n_ff)
        else:
            mat(b + "ffn_gate.weight", n_ff, n_embd)
            mat(b + "ffn_up.weight", n_ff, n_embd)
            mat(b + "ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def synthetic_cases(builddir, tmp, types):
    cases = []
    bench = os.path.join(builddir, "tools", "loom-bench")
    for preset in ("tiny", "small"):
        for t in ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k",
                  "q6_k"):
            if t not in types:
                continue
            path = os.path.join(tmp, "%s-%s.gguf" % (preset, t))
            if subprocess.run([bench, "model", "--preset", preset, "--type",
                               t, "--save", path],
                              stdout=subprocess.DEVNULL).returncode:
                print("%s: loom-bench cannot write it" % path)
                continue
            cases.append((path, LIMITS[t]))
    return cases


def vocab_cases(vocab_dir, quantize, tmp, types, archs):
    cases = []
    for arch, vocab, opts in MODELS:
        if arch not in archs:
            continue
        vpath = os.path.join(vocab_dir, vocab)
        if not os.path.exists(vpath):
            print("%s: not there, skipped" % vpath)
            continue
        stem = "%s-%s" % (arch, vocab[len("ggml-vocab-"):-len(".gguf")])
        for t in ("f32", "f16", "bf16", "q8_0", "q4_0"):
            path = os.path.join(tmp, "%s-%s.gguf" % (stem, t))
            if t not in types and not (t == "f32" and quantize):
                continue
            write_model(path, arch, vpath, t, opts)
            if t in types:
                cases.append((path, LIMITS[t]))
        if quantize:
            src = os.path.join(tmp, "%s-f32.gguf" % stem)
            for q in ("Q4_K_M", "Q5_K_M", "Q6_K"):
                if q not in types:
                    continue
                path = os.path.join(tmp, "%s-%s.gguf" % (stem, q))
                subprocess.run([quantize, src, path, q], check=True,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                cases.append((path, LIMITS[q]))
    return cases


def markdown(results):
    # One row per model (the file name without its type), one column per
    # type, as doc/accuracy.md's table; * marks an NMSE over its limit.
    rows, types = {}, []
    for path, e, ok in results:
        name = os.path.basename(path)[:-len(".gguf")]
        stem, _, t = name.rpartition("-")
        if not stem or (t not in LIMITS):
            stem, t = name, "nmse"
        if t not in types:
            types.append(t)
        fig = ("%.1e" % e).replace("e-0", "e-").replace("e+0", "e+")
        rows.setdefault(stem, {})[t] = fig + ("" if ok else " *")
    print()
    print("| file | %s |" % " | ".join(t.upper() for t in types))
    print("| --- |%s" % (" --- |" * len(types)))
    for stem, cells in rows.items():
        print("| %s | %s |" % (stem, " | ".join(cells.get(t, "-")
                                                 for t in types)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model")
    ap.add_argument("-p", "--prompt", default=PROMPT)
    ap.add_argument("--tokens", help="ids instead of -p")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--limit", type=float, default=1e-4)
    ap.add_argument("--vocab-dir", help="vocabulary-only GGUF files")
    ap.add_argument("--quantize", help="llama.cpp's llama-quantize")
    ap.add_argument("--archs", default="llama,qwen2,qwen3,qwen3moe,gemma3,"
                    "xverse,exaone,phi3,internlm2,mistral3,gpt-oss",
                    help="--vocab-dir: the architectures (default: all)")
    ap.add_argument("--types", default=",".join(LIMITS),
                    help="the weight types to check (default: all)")
    ap.add_argument("--no-repack", action="store_true",
                    help="llama.cpp's weights in plain buffers (not its "
                    "AMX or repacked layouts)")
    ap.add_argument("--markdown", action="store_true",
                    help="end with the NMSE table in doc/accuracy.md's form")
    o = ap.parse_args()
    use_build_tree(o.builddir)
    if o.no_repack:
        plain_buffers()
    tokens = [int(t) for t in o.tokens.split(",")] if o.tokens else None
    failed = 0
    results = []
    tmp = tempfile.TemporaryDirectory()
    if o.model:
        cases = [(o.model, o.limit)]
    elif o.vocab_dir:
        cases = vocab_cases(o.vocab_dir, o.quantize, tmp.name,
                            o.types.split(","), o.archs.split(","))
    else:
        cases = synthetic_cases(o.builddir, tmp.name, o.types.split(","))
    for path, limit in cases:
        e, per_pos, same, run = compare(o.builddir, path, o.prompt, tokens,
                                        o.threads)
        # With experts, a router near a tie can pick another expert on
        # one side at a position whose quantized activations differ: that
        # position then differs as two models do.  Up to one position in
        # sixteen may do so; the others must meet the limit, and the
        # positions are named.
        out = [i for i, x in enumerate(per_pos) if x > limit]
        moe = run["arch"].endswith("moe")
        ok = same is not False and (e <= limit or (
            moe and len(out) <= len(per_pos) // 16 and
            nmse_without(per_pos, out) <= limit))
        failed += not ok
        results.append((path, e, ok))
        print("%-30s %-8s %3d tokens  nmse %.3g (<= %.0e)%s  %s%s" % (
            os.path.basename(path), run["arch"], run["n_prompt"], e, limit,
            "" if same is None else "  ids %s" % ("same" if same else
                                                  "DIFFER"),
            "ok" if ok else "FAIL",
            "" if e <= limit else "  (position %s: %s; an expert chosen "
            "differently)" % (",".join(map(str, out)), ", ".join(
                "%.2g" % per_pos[i] for i in out))), flush=True)
    tmp.cleanup()
    print("%d of %d files agree" % (len(cases) - failed, len(cases)))
    if o.markdown:
        markdown(results)
    return 1 if failed else 0


sys.exit(main())
