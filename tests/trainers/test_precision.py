"""`--dtype bfloat16` and `--gradient-checkpointing` (trainers.precision,
trainers.activation_checkpointing). Real tiny models, the real Trainer and the real in-process vLLM
sampler."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rlvr.envs.episode import Episode
from rlvr.trainers import activation_checkpointing
from rlvr.trainers.batch import collate
from rlvr.trainers.config import TrainConfig
from rlvr.trainers.device import use_threads
from rlvr.trainers.loop import Trainer
from rlvr.trainers.policy import ValueHead, forward
from rlvr.trainers.precision import MasterWeightAdamW, adamw, autocast_forward, weight_dtype
from rlvr.verifiers.verdict import Outcome
from tests.conftest import random_qwen2, require, train_device
from tests.tolerances import forward_bound, gradient_bound

use_threads(1)  # as `rlvr train --threads 1` does: the Trainer leaves torch's threads to its caller

PAD = 0


def episode(prompt, completion, group=0):
    return Episode(
        "rlvr/Test-v0",
        "t",
        group,
        list(prompt),
        list(completion),
        [1] * len(completion),
        [-0.5] * len(completion),
        [1.0],
        Outcome.CORRECT,
        [],
        "stop",
    )


def shared_prompt_batch():
    """Three groups of three rows, each group sharing a prompt (so `forward` would share it)."""
    prompts = [[5, 6, 7, 8, 9, 10], [3, 4], [11, 12, 13]]
    return collate(
        [episode(p, [20 + i, 21 + j, 22][: 1 + (i + j) % 3], group=i) for i, p in enumerate(prompts) for j in range(3)],
        PAD,
    )


def config(tmp_path, **settings) -> TrainConfig:
    """A two-step GRPO run of the tiny model (HF sampler) on the device the suite follows (conftest), unless
    `settings` name another."""
    base = dict(
        device=train_device(),
        model="tiny",
        sampler="hf",
        algo="grpo",
        tasks_per_step=4,
        group_size=4,
        max_tokens=8,
        lr=1e-3,
        threads=1,
        progress=False,
        out=str(tmp_path),
        steps=2,
    )
    return TrainConfig.from_dict({**base, **settings})


# ---- bfloat16 ------------------------------------------------------------------------------------
def test_weight_dtype_is_bf16_on_cpu_only():
    assert weight_dtype("float32") == torch.float32
    assert weight_dtype("bfloat16", "cpu") == torch.bfloat16
    assert weight_dtype("bfloat16", "cuda") == torch.float32  # CUDA: fp32 weights under autocast
    with pytest.raises(ValueError, match="dtype"):
        weight_dtype("float16")


def test_master_weights_keep_updates_that_bf16_rounds_away():
    """Constant gradient 1, no weight decay: Adam's step is lr (m_hat = v_hat = 1), so 100 steps of
    lr 1e-4 move a weight of 1.0 to 0.99. In bf16 (spacing 2^-8 = 0.0039 just below 1.0) every
    single step of 1e-4 rounds back to 1.0; the float32 master accumulates them, and the model
    weight is 0.99 rounded to bf16: 0.98828125 (0.0017 away; 0.9921875 is 0.0022 away)."""
    plain = torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))
    mastered = torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))
    opt_plain = torch.optim.AdamW([plain], lr=1e-4, weight_decay=0.0)
    opt_master = adamw([{"params": [mastered]}], lr=1e-4, weight_decay=0.0)
    assert isinstance(opt_master, MasterWeightAdamW)
    for _ in range(100):
        for p, opt in ((plain, opt_plain), (mastered, opt_master)):
            opt.zero_grad()
            p.grad = torch.ones_like(p)
            opt.step()
    assert float(plain.detach()) == 1.0
    assert float(mastered.detach()) == 0.98828125 and mastered.dtype == torch.bfloat16
    master = opt_master.param_groups[0]["params"][0]
    assert master.dtype == torch.float32 and abs(float(master.detach()) - 0.99) < 1e-5
    opt_master.zero_grad()
    assert mastered.grad is None and master.grad is None
    assert isinstance(adamw([{"params": [torch.nn.Parameter(torch.ones(1))]}], lr=1.0), torch.optim.AdamW)


def test_bf16_training_step_on_cpu(tmp_path):
    """The policy and reference really are bf16, the optimizer steps float32 masters, a step runs
    and moves the weights, and the sampler/trainer logprob gap is reported."""
    t = Trainer(config(tmp_path, dtype="bfloat16", device="cpu"))  # bf16 weights are the CPU's way (CUDA autocasts)
    assert {p.dtype for p in t.policy.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in t.models.reference.parameters()} == {torch.bfloat16}
    assert isinstance(t.optimizer, MasterWeightAdamW)
    before = {n: p.detach().clone() for n, p in t.policy.named_parameters()}
    metrics = t.train_step()
    assert metrics["optimizer_steps"] == 1 and torch.isfinite(torch.tensor(metrics["policy_loss"]))
    assert 0 <= metrics["logprob_gap_max"] < 1.0, metrics["logprob_gap_max"]  # HF generate and forward, both bf16
    moved = max(float((p.detach().float() - before[n].float()).abs().max()) for n, p in t.policy.named_parameters())
    assert moved > 0
    print(f"bf16 HF sampler: logprob_gap_max {metrics['logprob_gap_max']:.3g}, mean {metrics['logprob_gap_mean']:.3g}")


@pytest.mark.vllm
def test_bf16_vllm_sampler_gap(tmp_path):
    """vLLM samples in bf16 too; the gap is bf16 rounding between two kernels' orders of sums
    (float32's is < 1e-4). Measured here, printed, and bounded loosely."""
    require(importlib.util.find_spec("vllm") is not None, "vllm is not installed")
    t = Trainer(config(tmp_path, dtype="bfloat16", sampler="vllm", tasks_per_step=8, max_tokens=12, steps=3))
    try:
        gaps = []
        for _ in range(3):
            m = t.train_step()
            t.step += 1
            gaps.append((m["logprob_gap_max"], m["logprob_gap_mean"]))
        print("bf16 vLLM sampler: (gap max, gap mean) per step", gaps)
        assert all(g_max < 0.25 and g_mean < 0.02 for g_max, g_mean in gaps), gaps
    finally:
        t.sampler.close()


def test_autocast_forward_runs_bf16_matmuls_on_fp32_weights():
    """The CUDA path, exercised with CPU autocast: weights and gradients stay float32, the logits
    come out bf16, and the logprobs are close to float32's."""
    model, reference = random_qwen2(), random_qwen2()
    autocast_forward(model, "cpu")
    b = shared_prompt_batch()
    assert model(b.input_ids).logits.dtype == torch.bfloat16
    out, want = forward(model, b, 1.0), forward(reference, b, 1.0)
    mask = b.loss_mask > 0
    torch.testing.assert_close(out.logprobs[mask], want.logprobs[mask], atol=0.05, rtol=0)
    out.logprobs[mask].sum().backward()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


# ---- gradient checkpointing ------------------------------------------------------------------------
def test_gradient_checkpointing_gives_the_same_gradients():
    """Same logprobs, values and gradients with and without checkpointing (which turns prompt
    sharing off in differentiable forwards), and the layers really are recomputed."""
    b = shared_prompt_batch()
    plain, ckpt = random_qwen2(), activation_checkpointing.enable(random_qwen2())
    head = ValueHead(plain.config.hidden_size)
    torch.nn.init.normal_(head.linear.weight, std=0.1)
    calls, mlp = [], ckpt.model.layers[0].mlp
    mlp_forward = mlp.forward
    mlp.forward = lambda *a, **k: calls.append(1) or mlp_forward(*a, **k)  # the replay skips forward hooks
    grads, outs = [], []
    for model in (plain, ckpt):
        out = forward(model, b, 0.9, with_entropy=True, value_head=head)
        ((out.logprobs + out.values + out.entropy) * b.loss_mask).sum().backward()
        outs.append(out)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert len(calls) == 2  # one forward without shared prompts, and its replay in the backward
    mask = b.loss_mask > 0  # prompt sharing on vs off: the same sums in other orders (tests.tolerances)
    for name in ("logprobs", "entropy", "values"):
        want = getattr(outs[0], name)[mask]
        atol = forward_bound(plain.config, want)
        torch.testing.assert_close(getattr(outs[1], name)[mask], want, atol=atol, rtol=0)
    atol = gradient_bound(plain.config, int(mask.sum()), grads[0])
    torch.testing.assert_close(grads[1], grads[0], atol=atol, rtol=0)


@torch.no_grad()
def test_checkpointed_model_still_uses_its_cache_without_grad():
    """No-grad forwards (old and reference logprobs, `generate`) run unchanged: prompt sharing
    through the KV cache gives the plain model's numbers, and generation is the same."""
    b = shared_prompt_batch()
    plain, ckpt = random_qwen2(), activation_checkpointing.enable(random_qwen2())
    mask = b.loss_mask > 0
    want = forward(plain, b, 1.0).logprobs[mask]
    atol = forward_bound(plain.config, want)
    torch.testing.assert_close(forward(ckpt, b, 1.0).logprobs[mask], want, atol=atol, rtol=0)
    ids = torch.tensor([[5, 6, 7, 8]])
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=PAD)
    assert torch.equal(ckpt.generate(ids, **kw), plain.generate(ids, **kw))
    assert not ckpt.training  # the model stays in eval mode (dropout off)


def test_trainer_with_gradient_checkpointing_steps(tmp_path):
    t = Trainer(config(tmp_path, gradient_checkpointing=True))
    assert t.policy.is_gradient_checkpointing
    assert t.train_step()["optimizer_steps"] == 1


def test_bf16_run_saves_and_resumes(tmp_path, train_device):
    """A checkpoint of a bf16 run resumes, on the device the suite follows: on the CPU its bf16
    weights and the masters' AdamW state, on CUDA its float32 weights (autocast) and AdamW state."""
    first = Trainer(config(tmp_path, dtype="bfloat16", steps=1, eval_tasks=0, device=train_device))
    first.train()
    resumed = Trainer(config(tmp_path, dtype="bfloat16", steps=2, eval_tasks=0, resume=True, device=train_device))
    want = weight_dtype("bfloat16", torch.device(train_device).type)
    assert resumed.step == 1 and isinstance(resumed.optimizer, MasterWeightAdamW) == (want == torch.bfloat16)
    assert len(resumed.optimizer.state) == len(first.optimizer.state) > 0
    for (name, p), q in zip(resumed.policy.named_parameters(), first.policy.parameters()):
        assert p.dtype == want and torch.equal(p, q), name
    assert resumed.train()["steps"] == 2


def test_bf16_instructions_are_read_from_cpuinfo():
    from rlvr.trainers.precision import bf16_in_cpuinfo

    amd = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n"
    sapphire = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"
    graviton = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"
    assert not bf16_in_cpuinfo(amd)
    assert bf16_in_cpuinfo(sapphire) and bf16_in_cpuinfo(graviton)
    assert not bf16_in_cpuinfo("model name\t: bf16 lookalike in a name\nflags\t: sse2\n")


def test_rlvr_train_takes_float32_on_a_cpu_without_bf16(tmp_path, capsys):
    """`--dtype bfloat16` on a CPU without bf16 instructions would run ~40x slower: float32, said in one line
    (`rlvr train --check` through its entry point in this process)."""
    import json

    from rlvr.cli import main
    from rlvr.trainers.precision import cpu_has_bf16

    code = main(["train", "--dtype", "bfloat16", "--device", "cpu", "--out", str(tmp_path / "run"), "--check"])
    done = capsys.readouterr()
    assert code == 0, done.err
    dtype = json.loads(done.out)["config"]["dtype"]
    if cpu_has_bf16():
        assert dtype == "bfloat16" and "no bfloat16 instructions" not in done.err
    else:
        assert dtype == "float32" and "this CPU has no bfloat16 instructions" in done.err
