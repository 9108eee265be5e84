"""Build the "small" benchmark model (`--model small`, ~30M parameters, random weights) and print
where it is, its size, the build time and the weights' SHA-256.

    python scripts/build_small_model.py              # into the cache (what `--model small` uses)
    python scripts/build_small_model.py --out DIR    # elsewhere (e.g. to compare hashes)

Nothing needs to run this: `--model small` builds the model on first use. The same machine
builds the same bytes (`trainers/tiny/small_model.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from rlvr.trainers.tiny.small_model import SmallSpec, build, small_model_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: the cache)")
    args = parser.parse_args(argv)
    spec = SmallSpec()
    started = time.perf_counter()
    if args.out is None:
        out = small_model_dir(spec)
    else:
        out = args.out
        build(out, spec)
    seconds = time.perf_counter() - started
    weights = out / "model.safetensors"
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    from transformers import AutoConfig

    from rlvr.trainers.tiny.small_model import parameter_count

    parameters = parameter_count(spec, AutoConfig.from_pretrained(out).vocab_size)
    print(
        f"{out}: {parameters:,} parameters, {weights.stat().st_size / 2**20:.0f} MiB, "
        f"{seconds:.1f} s (0 if cached), sha256 {sha}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
