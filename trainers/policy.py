"""Per-token logprobs, entropy and values of completions under a causal LM.

Logits are divided by the sampling temperature before the softmax, because the sampler reports
logprobs of the temperature-scaled distribution it actually sampled from; both sides then speak
of the same distribution. The value of completion token j is read from the hidden state that
predicts it (column P + j - 1, see `trainers.batch`): the state before the token was chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rlvr.trainers.batch import Batch
from rlvr.trainers.device import model_device
from rlvr.trainers.packing import PackedLayout, packed_layout


@dataclass
class PolicyOutput:
    logprobs: torch.Tensor  # (B, T) of the completion tokens
    entropy: torch.Tensor | None = None  # (B, T) of the temperature-scaled distribution
    values: torch.Tensor | None = None  # (B, T) from the value head, if one was given

    def to(self, device: torch.device) -> PolicyOutput:
        """On `device` (differentiably: gradients flow back to where the outputs were computed)."""
        move = lambda x: None if x is None else x.to(device)  # noqa: E731
        return PolicyOutput(move(self.logprobs), move(self.entropy), move(self.values))


class ValueHead(nn.Module):
    """A linear value head on the policy's last hidden state. Zero-initialised so the first
    values are 0 and the first value loss does not shake the shared trunk."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        # the trunk may run in bfloat16 (`--dtype bfloat16`); the head keeps its own dtype
        return self.linear(hidden.to(self.linear.weight.dtype)).squeeze(-1)


class Critic(nn.Module):
    """A separate critic: its own copy of a causal LM (started from the policy's weights) with a
    value head on its trunk, built where the trunk is (a head left on the CPU would meet a CUDA trunk)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.head = ValueHead(model.config.hidden_size).to(model_device(model))

    def forward(self, batch: Batch) -> torch.Tensor:
        # the trunk only: a critic needs no logits (its lm_head is kept so the checkpoint loads as a causal LM)
        home, batch = batch.input_ids.device, batch.to(model_device(self.model))  # see trainers.device
        if batch.packed:
            layout = packed_layout(batch)
            hidden = self.model.get_decoder()(**_packed_inputs(layout)).last_hidden_state
            return layout.unpack(self.head(hidden[0, layout.predictors]).float()).to(home)
        hidden = self.model.get_decoder()(**_model_inputs(batch)).last_hidden_state
        return self.head(_completion_hidden(hidden, batch)).float().to(home)


def _model_inputs(batch: Batch) -> dict[str, torch.Tensor]:
    return {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask, "position_ids": batch.position_ids}


def _packed_inputs(layout: PackedLayout) -> dict[str, torch.Tensor | bool]:
    # No attention mask and no cache: transformers then reads the sequence boundaries from the
    # restarting position ids and attends within each sequence only (see `trainers.packing`).
    return {"input_ids": layout.input_ids, "position_ids": layout.position_ids, "use_cache": False}


def _completion_hidden(hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Hidden states at the columns that predict the completion tokens: (B, T, H)."""
    p, t = batch.prompt_len, batch.completion_len
    return hidden[:, p - 1 : p + t - 1]


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[token], computed as logit - logsumexp to avoid a (B, T, V) log-softmax copy."""
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def forward(
    model: nn.Module,
    batch: Batch,
    temperature: float,
    *,
    with_entropy: bool = False,
    value_head: ValueHead | None = None,
    share_prompts: bool = True,
) -> PolicyOutput:
    """Logprobs (and optionally entropy and values) of `batch`'s completion tokens under `model`.

    `share_prompts`: rows with the same prompt (a group's G samples) run the prompt once and
    reuse its key/value cache (differentiably) for their completions; when prompts are much
    longer than completions this is several times cheaper, and it gives the same numbers.

    A `batch.packed` micro-batch runs as one flattened, padding-free sequence instead (see
    `trainers.packing`); its prompts are not shared (each row runs its own), and its outputs are
    0 where a row has no token (the padded pass leaves arbitrary numbers there; both are masked).

    The forward runs on `model`'s device; the outputs come back on `batch`'s (`trainers.device`)."""
    if temperature <= 0:
        raise ValueError(f"training needs a sampling temperature > 0, got {temperature}")
    home, batch = batch.input_ids.device, batch.to(model_device(model))
    if batch.packed:
        return _packed_forward(model, batch, temperature, with_entropy, value_head).to(home)
    want_hidden = value_head is not None
    # Gradient checkpointing drops the KV cache in a differentiable forward (the backward replay would
    # write it twice): every row then runs its own prompt (`trainers.activation_checkpointing`).
    checkpointing = torch.is_grad_enabled() and getattr(model, "is_gradient_checkpointing", False)
    share_prompts = share_prompts and not checkpointing
    shared = _shared_prompt_pass(model, batch, want_hidden) if share_prompts else None
    logits, hidden = shared if shared is not None else _full_pass(model, batch, want_hidden)
    logits = logits.float() / temperature
    result = PolicyOutput(logprobs=token_logprobs(logits, batch.completion_ids))
    if with_entropy:
        result.entropy = entropy_from_logits(logits)
    if value_head is not None:
        result.values = value_head(hidden).float()
    return result.to(home)


def _packed_forward(
    model: nn.Module, batch: Batch, temperature: float, with_entropy: bool, value_head: ValueHead | None
) -> PolicyOutput:
    """`forward` on the flattened batch: logits only at the M states that predict a completion
    token (the rest of the flat sequence needs no (N, V) logits)."""
    layout = packed_layout(batch)
    want_hidden = value_head is not None
    out = model(**_packed_inputs(layout), logits_to_keep=layout.predictors, output_hidden_states=want_hidden)
    logits = out.logits[0].float() / temperature  # (M, V)
    result = PolicyOutput(logprobs=layout.unpack(token_logprobs(logits, layout.targets)))
    if with_entropy:
        result.entropy = layout.unpack(entropy_from_logits(logits))
    if value_head is not None:
        result.values = layout.unpack(value_head(out.hidden_states[-1][0, layout.predictors]).float())
    return result


def _full_pass(model: nn.Module, batch: Batch, want_hidden: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T, V) logits predicting the completion tokens (and (B, T, H) hidden states)."""
    # Only the T + 1 last columns' logits are needed: the last one predicts nothing we train on.
    out = model(**_model_inputs(batch), logits_to_keep=batch.completion_len + 1, output_hidden_states=want_hidden)
    hidden = _completion_hidden(out.hidden_states[-1], batch) if want_hidden else None
    return out.logits[:, :-1], hidden


def _shared_prompt_pass(model: nn.Module, batch: Batch, want_hidden: bool):
    """Like `_full_pass`, running each distinct prompt once; None when no two rows share one."""
    p = batch.prompt_len
    prompts, index = torch.unique(batch.input_ids[:, :p], dim=0, return_inverse=True)
    if len(prompts) == len(batch):
        return None
    # one representative row per distinct prompt, for its mask and positions
    first = torch.full((len(prompts),), len(batch), dtype=torch.long, device=index.device).scatter_reduce(
        0, index, torch.arange(len(batch), device=index.device), reduce="amin"
    )
    head = model(
        input_ids=prompts,
        attention_mask=batch.attention_mask[first, :p],
        position_ids=batch.position_ids[first, :p],
        use_cache=True,
        logits_to_keep=1,
        output_hidden_states=want_hidden,
    )
    cache = head.past_key_values
    cache.reorder_cache(index)  # index_select: each row gets its prompt's keys and values, with gradient
    tail = model(
        input_ids=batch.completion_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids[:, p:],
        past_key_values=cache,
        use_cache=True,
        output_hidden_states=want_hidden,
    )
    # completion token 0 is predicted by the prompt's last column, token j by completion column j - 1
    logits = torch.cat([head.logits[index], tail.logits[:, :-1]], dim=1)
    hidden = None
    if want_hidden:
        hidden = torch.cat([head.hidden_states[-1][index, -1:], tail.hidden_states[-1][:, :-1]], dim=1)
    return logits, hidden
