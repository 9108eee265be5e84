"""The cached `small` benchmark model (trainers.tiny.small_model): built deterministically from its
spec, cached by it, about 30M parameters by default."""

from __future__ import annotations

import hashlib

import pytest

from rlvr.trainers.tiny.small_model import SmallSpec, build, parameter_count, small_model_dir

REDUCED = SmallSpec(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2)


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_small_model_build_is_deterministic(tmp_path):
    counts = [build(tmp_path / name, REDUCED) for name in ("a", "b")]
    for name in ("model.safetensors", "config.json", "tokenizer.json", "generation_config.json"):
        assert digest(tmp_path / "a" / name) == digest(tmp_path / "b" / name), name
    assert counts[0] == counts[1] == parameter_count(REDUCED, vocab_size=1024)
    assert build(tmp_path / "c", SmallSpec(**{**REDUCED.__dict__, "seed": 1})) == counts[0]
    assert digest(tmp_path / "c" / "model.safetensors") != digest(tmp_path / "a" / "model.safetensors")


def test_small_model_is_cached_by_spec(tmp_path):
    first = small_model_dir(REDUCED, root=tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert small_model_dir(REDUCED, root=tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    other = small_model_dir(SmallSpec(**{**REDUCED.__dict__, "num_layers": 3}), root=tmp_path)
    assert other != first and other.name.startswith("small-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, other.name])  # no temporaries left


def test_default_small_spec_is_about_30m_parameters():
    assert 28e6 < parameter_count(SmallSpec(), vocab_size=1024) < 32e6
    with pytest.raises(ValueError, match="heads"):
        SmallSpec(hidden_size=100, num_heads=8)
