"""Build the tiny random-weight Qwen2-VL that scripts/multimodal_engine.sh serves with vLLM.

Run by ``scripts/multimodal_engine.sh setup`` inside the engine's own virtualenv:

    python build_tiny_qwen2_vl.py --tokenizer GEMMA_DIR --chat-template FILE --out DIR

Why a random-weight model: the checks this server exists for (image and video input, corrupt
media, media throughput, usage counting media tokens, streaming with media) test vLLM's media
path, its decoders, processors and error handling, which run the same whatever the weights.
No pretrained vision-language model can be installed here (no hub, and PyPI carries none),
so the model is built from a config: Qwen2VLForConditionalGeneration, an architecture vLLM's
CPU build serves, made as small as it goes (2 text layers of width 256, a 2-layer vision tower
of width 64; about 69M parameters, nearly all of them the 262k-token embedding). It reads no
image and writes no sense: the checks of what a model understands are records naming it.

The tokenizer is Gemma 3's (the converted checkpoint's, GEMMA_DIR) plus Qwen2-VL's four vision
tokens, so the two real vLLM servers count text alike. Everything is seeded and written in a
fixed order: the same inputs give the same weights, byte for byte (the builder checks its own
output against a second build only when asked: --check-determinism).

Output is built in ``DIR.tmp-<pid>`` and renamed into place only once checked, so an
interrupted build never leaves a half-written ``DIR``; the caller writes its completion marker.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

T0 = time.monotonic()
SEED = 0
# Qwen2-VL's own placeholder tokens; the processor and vLLM find them by these texts.
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
# Gemma 3's ids (scripts/real_engine/convert_gguf.py): <bos>, <eos> and <end_of_turn>, <pad>.
BOS_ID, EOS_IDS, PAD_ID = 2, [1, 106], 0
CONTEXT = 32768
TEXT = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=CONTEXT, rms_norm_eps=1e-6,
            # M-RoPE: the head's 32 rotary pairs split over time, height and width.
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [8, 12, 12]})
VISION = dict(depth=2, embed_dim=64, hidden_size=TEXT["hidden_size"], num_heads=4, mlp_ratio=2,
              patch_size=14, spatial_merge_size=2, temporal_patch_size=2, in_channels=3)
# Qwen2-VL's processor limits (its preprocessor_config): 4 to 1,280 merged patches an image.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 28 * 28 * 1280
# A video frame is capped lower than Qwen2-VL's 768 patches: at start vLLM runs its processor
# on the largest video the context holds, and on two CPU cores that took 4 minutes at the
# default caps. 128 merged patches hold the suite's 256x256 test video unscaled.
VIDEO_MAX_PIXELS, VIDEO_MAX_FRAMES = 28 * 28 * 128, 16


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} build-qwen2-vl +{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def build(tokenizer_dir: Path, chat_template: str, out: Path, dtype: str) -> None:
    import torch
    from transformers import (AutoTokenizer, Qwen2VLConfig, Qwen2VLForConditionalGeneration,
                              Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor)

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    added = tokenizer.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    ids = {text: tokenizer.convert_tokens_to_ids(text) for text in VISION_TOKENS}
    if added != len(VISION_TOKENS) or len(set(ids.values())) != len(VISION_TOKENS):
        raise SystemExit(f"the vision tokens did not become {len(VISION_TOKENS)} new tokens: {ids}")
    tokenizer.chat_template = chat_template

    config = Qwen2VLConfig(
        text_config={**TEXT, "vocab_size": len(tokenizer), "bos_token_id": BOS_ID, "eos_token_id": EOS_IDS,
                     "pad_token_id": PAD_ID},
        vision_config=VISION,
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        tie_word_embeddings=True,
    )
    # Seeded, single-threaded initialisation: the same inputs give the same weights.
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model = Qwen2VLForConditionalGeneration(config).to(getattr(torch, dtype)).eval()
    params = sum(p.numel() for p in model.parameters())
    log(f"initialised Qwen2VLForConditionalGeneration with seed {SEED}: {params / 1e6:.1f}M parameters, {dtype}")

    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
        video_processor=Qwen2VLVideoProcessor(size={"shortest_edge": MIN_PIXELS, "longest_edge": VIDEO_MAX_PIXELS},
                                              max_frames=VIDEO_MAX_FRAMES),
        tokenizer=tokenizer, chat_template=chat_template)

    tmp = out.parent / f"{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _clean_tokenizer_config(tmp)
        # No sampling defaults: the request is the only source of sampling parameters.
        (tmp / "generation_config.json").write_text(json.dumps(
            {"bos_token_id": BOS_ID, "eos_token_id": EOS_IDS, "pad_token_id": PAD_ID}, indent=2) + "\n")
        check(tmp, ids)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {out} ({sum(p.stat().st_size for p in out.iterdir()) / 2**20:.0f} MiB, "
        f"weights sha256 {weights_digest(out)[:16]})")


def _clean_tokenizer_config(directory: Path) -> None:
    # Paths of this machine's build directory are meaningless elsewhere.
    path = directory / "tokenizer_config.json"
    config = json.loads(path.read_text())
    for key in ("is_local", "local_files_only", "name_or_path", "_name_or_path"):
        config.pop(key, None)
    config["model_max_length"] = CONTEXT
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def weights_digest(directory: Path) -> str:
    return hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()


def check(directory: Path, ids: dict[str, int]) -> None:
    """Cheap checks that catch a bad build before vLLM spends minutes on it."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(directory)
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour?"}]}],
        tokenize=False, add_generation_prompt=True)
    expected = "<bos><start_of_turn>user\n<|vision_start|><|image_pad|><|vision_end|>What colour?<end_of_turn>\n" \
               "<start_of_turn>model\n"
    if prompt != expected:
        raise SystemExit(f"chat template renders {prompt!r}, expected {expected!r}")
    for text, token_id in ids.items():
        if processor.tokenizer(text, add_special_tokens=False)["input_ids"] != [token_id]:
            raise SystemExit(f"{text!r} is not the single token {token_id}")
    config = json.loads((directory / "config.json").read_text())
    if config.get("architectures") != ["Qwen2VLForConditionalGeneration"]:
        raise SystemExit(f"unexpected architectures {config.get('architectures')}")
    log(f"checked: template renders the image placeholder, vision tokens {sorted(ids.values())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, type=Path, help="The converted Gemma 3 270M directory")
    parser.add_argument("--chat-template", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--check-determinism", action="store_true",
                        help="Build twice and stop unless both weights files are identical")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    template = args.chat_template.read_text()
    build(args.tokenizer, template, out, args.dtype)
    if args.check_determinism:
        second = out.parent / f"{out.name}.second-{os.getpid()}"
        try:
            build(args.tokenizer, template, second, args.dtype)
            if weights_digest(second) != weights_digest(out):
                raise SystemExit("two builds from the same inputs wrote different weights")
            log("determinism: a second build wrote the same weights")
        finally:
            shutil.rmtree(second, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
