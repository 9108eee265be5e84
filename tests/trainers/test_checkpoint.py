"""Checkpoints: atomic, pruned, loadable by `transformers`, RNG states round-trip; a partial
write (a crash mid-save) is ignored and cleaned up."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from rlvr.trainers import checkpoint as ckpt


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=False,
        )
    )


def save(out, step, model, keep_last=2, **state):
    return ckpt.save_checkpoint(out, step, lambda d: model.save_pretrained(d), {"note": "x", **state}, keep_last)


def test_save_load_prune(tmp_path, model):
    for step in (1, 2, 3):
        path = save(tmp_path, step, model, value=torch.tensor([float(step)]))
    assert path.name == "step-00000003"
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [2, 3]  # keep_last=2
    assert sorted(p.name for p in ckpt.checkpoint_dir(tmp_path).iterdir()) == ["step-00000002", "step-00000003"]
    assert ckpt.latest_checkpoint(tmp_path) == path
    state = ckpt.load_state(path)
    assert state["step"] == 3 and state["value"].item() == 3.0 and state["note"] == "x"
    loaded = AutoModelForCausalLM.from_pretrained(path)  # a plain Hugging Face directory
    assert (path / "model.safetensors").is_file()
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    # re-saving the same step (after a resume) replaces it whole
    save(tmp_path, 3, model, value=torch.tensor([30.0]))
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path))["value"].item() == 30.0


def test_partial_write_is_ignored_and_removed(tmp_path, model):
    save(tmp_path, 5, model)
    partial = ckpt.checkpoint_dir(tmp_path) / ".tmp-step-00000006-12345"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half a file")
    bogus = ckpt.checkpoint_dir(tmp_path) / "step-00000007"  # no trainer_state.pt: incomplete
    bogus.mkdir()
    assert ckpt.latest_checkpoint(tmp_path).name == "step-00000005"
    assert ckpt.remove_partial(tmp_path) == [partial] and not partial.exists()


def test_unreadable_state_is_a_clear_error(tmp_path):
    with pytest.raises(ckpt.CheckpointError, match="trainer_state.pt is missing"):
        ckpt.load_state(tmp_path)
    (tmp_path / ckpt.STATE_FILE).write_bytes(b"garbage")
    with pytest.raises(ckpt.CheckpointError, match="cannot read"):
        ckpt.load_state(tmp_path)


def test_rng_states_round_trip(tmp_path, model):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    path = save(tmp_path, 1, model, rng=ckpt.rng_state())
    want = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    ckpt.set_rng_state(ckpt.load_state(path)["rng"])  # through torch.load(weights_only=True)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == want
