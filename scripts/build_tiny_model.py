"""Rebuild the built-in tiny model (`--model tiny`) and measure it.

    python scripts/build_tiny_model.py                  # rebuild trainers/assets/tiny in place
    python scripts/build_tiny_model.py --out /tmp/tiny  # build elsewhere (e.g. to compare hashes)

Prints the build time, the weights' SHA-256 (the same machine and thread count rebuild the same bytes) and the
accuracy on held-out `rlvr/Arithmetic-v0` tasks, sampled at temperature 1.0 and greedy, and
writes the model card (README.md) next to the weights.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from rlvr.envs.seeds import HELD_OUT_SEED_START
from rlvr.trainers.models import TINY_DIR, load_causal_lm, load_tokenizer
from rlvr.trainers.tiny.model import TinySpec, accuracy, build

CARD = """# tiny: rlvr's built-in default model

A Qwen2-style causal LM of {parameters:,} parameters (hidden {hidden_size}, {num_layers} layers, {num_heads} heads,
{num_kv_heads} KV heads, untied embeddings, float32, a context of {max_position_embeddings} tokens) with a \
byte-level BPE
tokenizer of {vocab} tokens (digits split one per token, ChatML chat template, eos `<|im_end|>`), both made from
scratch by `scripts/build_tiny_model.py` (`trainers/tiny/model.py`): no download.

The tokenizer is trained on the text of every built-in environment. The model is warm-started by {sft_steps}
supervised steps (batch {batch_size}, AdamW, peak lr {learning_rate}; one source per batch, in the cycle
{mix_text}) on whole conversations in each environment's own format (`trainers/tiny/corpus.py`), loss on the
model's turns only:

- `rlvr/Arithmetic-v0` difficulty {difficulty_text}: the prompt, then `\\boxed{{N}}`;
- `rlvr/SymbolicMath-v0` difficulty 1: the prompt, then SymPy's answer in `\\boxed{{}}`;
- `rlvr/ReasoningGym-v0` (chain_sum, reasoning-gym's dataset seed 12345, not the env's 0): `<answer>N</answer>`;
- `rlvr/GuessNumber-v0`: binary search played to the secret, with the env's "higher"/"lower" replies;
- `rlvr/PythonTool-v0`: the reference tool call, its output, then `The answer is \\boxed{{N}}.`;
- code (`rlvr/Code-v0`'s format): synthetic one-line idioms and short stdin programs
  (`trainers/tiny/code_tasks.py`), with names of one to three parts in any order (verbs, words, made-up
  letters) so that they must be copied from the statement, not guessed; none of `rlvr/Code-v0`'s 35 tasks (a
  test checks names and statements). One template, a unit conversion given as a formula, resembles
  `celsius_to_fahrenheit` (similarity 0.74), meant to teach copying a formula.

All tasks come from seeds below the held-out ones (1,000,000+), which the trainer and `rlvr eval` measure on.
In the answers worked out ({smoothing_text}), each digit's target is label-smoothed ({digit_smoothing} of it spread
over the ten digits), so samples at temperature 1.0 are often one digit off: RL has signal and room to improve
(sharpening alone is worth the gap between the two rows below). Digits copied from the prompt or a tool's output
(tool calls, programs) are not smoothed.

Accuracy on {n} held-out tasks of `rlvr/Arithmetic-v0`, difficulty 2 (seeds {first}+; exact boxed integer):

| decoding | accuracy | replies of the form `\\boxed{{integer}}` |
|---|---|---|
| sampled, temperature 1.0 | {t1:.1%} | {t1_fmt:.1%} |
| greedy | {greedy:.1%} | {greedy_fmt:.1%} |

Every built-in environment, measured with `rlvr eval` by `benchmarks/tiny_envs.py`: see
`benchmarks/README.md`. Known limit of the default spec: the model writes every format, and on the code
environments it solves the stdin programs whose idiom it was taught (`sum_numbers`), but it rarely copies a
function's name from a statement (for `celsius_to_fahrenheit` it writes `def useus_to_fahrenhe(c)`), so its
code pass@8 is small (0.007 on 140 draws of the 35 tasks).

Build: {seconds:.0f} s wall, {cpu_seconds:.0f} s CPU, on {threads} threads (deterministic kernels, seed {seed});
`model.safetensors` SHA-256 `{sha}`.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TINY_DIR, help=f"output directory (default {TINY_DIR})")
    parser.add_argument("--eval-tasks", type=int, default=500, help="held-out tasks to measure on (0: skip)")
    args = parser.parse_args(argv)

    spec = TinySpec()
    built = build(args.out, spec)
    sha = hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest()
    print(
        f"built {args.out} in {built.seconds:.1f} s ({built.cpu_seconds:.1f} s CPU): "
        f"{built.parameters:,} parameters, vocabulary "
        f"{built.vocab_size}, final loss {built.final_loss:.3f}, sha256 {sha}"
    )
    if args.eval_tasks <= 0:
        return 0
    model, tokenizer = load_causal_lm(args.out), load_tokenizer(args.out)
    sampled = accuracy(model, tokenizer, n=args.eval_tasks, temperature=1.0)
    greedy = accuracy(model, tokenizer, n=args.eval_tasks, temperature=0.0)
    print(f"{'decoding':<12} {'accuracy':>9} {'well-formed':>12}")
    for name, acc in (("T=1.0", sampled), ("greedy", greedy)):
        print(f"{name:<12} {acc.correct:>9.1%} {acc.well_formed:>12.1%}")
    (args.out / "README.md").write_text(
        CARD.format(
            **spec.__dict__,
            mix_text=", ".join(f"{name} x{count}" for name, count in spec.mix),
            difficulty_text=", ".join(map(str, spec.difficulties)),
            smoothing_text=", ".join(spec.smoothing_sources),
            parameters=built.parameters,
            vocab=built.vocab_size,
            n=args.eval_tasks,
            first=HELD_OUT_SEED_START,
            t1=sampled.correct,
            t1_fmt=sampled.well_formed,
            greedy=greedy.correct,
            greedy_fmt=greedy.well_formed,
            seconds=built.seconds,
            cpu_seconds=built.cpu_seconds,
            sha=sha,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
