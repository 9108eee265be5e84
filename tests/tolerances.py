"""Bounds for float32 comparisons, derived from the dtype and the size of the reduction, never the
digits one CPU happens to give.

Two float32 evaluations of one real value differ when their sums run in other orders: packed vs
padded micro-batches, 4 rows vs 16 per micro-batch, two ranks vs one, prompt sharing on or off,
another CPU (AMD EPYC and Intel Xeon kernels block their sums differently and differ in the last
digits) or CUDA. The rule (`float32_bound`):

    bound = 2 x layers x sqrt(terms) x eps x max(magnitude, 1),   eps = 2^-23 (float32)

- sqrt(terms), not terms: every addition of a sum of `terms` products rounds by at most half an
  ulp of the partial sum, with a sign that behaves like a coin (Higham, "Accuracy and Stability of
  Numerical Algorithms", 2.8, the probabilistic bound): they add up like a random walk, to about
  sqrt(terms) ulps of the sum's scale. The worst case, terms x eps, is 11x (terms 128) to 64x
  (terms 4096) looser and would hide real bugs at that size.
- x magnitude: the scale of the sum and of its partial sums, which sets their ulp: the
  root-sum-square of the terms (a sum may cancel to near 0, its roundings do not). For a model's
  outputs, whose activations are normalised to order 1 at every layer, the largest value compared,
  at least 1, stands for it.
- x layers: each layer's relative error carries into the next and adds to it.
- x 2: two evaluations, each off by up to the bound, for margin.
A bug (a leaked mask, a wrong position, a dropped micro-batch) moves values by 1e-3 and more.

Checked against what was measured (the bounds computed by this rule for those comparisons):
packed vs padded logprobs of the tiny model (hidden 128, 4 layers, |logprob| up to ~10): Intel Xeon
~4e-6, AMD EPYC 1.14e-5, where 1e-5 had been allowed; the rule gives 1.3e-4. Packed vs padded
gradients (640 tokens, |g| ~1): 9e-6 (sdpa), 2e-7 (eager); the rule (`gradient_bound`) gives 3e-5.
tests/test_tolerances.py checks the rule itself on float32 dot products against float64: in
every order torch sums them (BLAS, vectorised, one by one), the error is at most 0.22 of
sqrt(terms) x eps x root-sum-square (measured at 128, 640 and 4096 terms), under the half of the
bound that one evaluation may take.

Adam is another matter (`assert_adam_runs_agree`): it divides by |g|, so a weight whose gradient is
itself at rounding noise can move by up to lr per step when two runs' gradients differ by 1e-7.

Comparisons of bit-identical computations (an exact resume, the same forward twice) stay exact
(`torch.equal`): they must not use these bounds.
"""

from __future__ import annotations

import math

FLOAT32_EPS = 2.0**-23


def float32_bound(terms: int, magnitude: float, layers: int = 1) -> float:
    """How far two float32 evaluations of one value may drift apart when their sums of `terms`
    products run in other orders, compounding over `layers`, at values of `magnitude` (the rule above)."""
    return 2.0 * layers * math.sqrt(terms) * FLOAT32_EPS * max(magnitude, 1.0)


def forward_bound(config, *tensors) -> float:
    """`float32_bound` for a transformer's outputs (`config`: its Hugging Face config): sums of
    hidden_size terms through num_hidden_layers + 1 (the output layer) layers, at the size of the
    largest of `tensors` (the values compared)."""
    magnitude = max(float(t.detach().abs().max()) for t in tensors)
    return float32_bound(config.hidden_size, magnitude, layers=config.num_hidden_layers + 1)


def gradient_bound(config, tokens: int, *gradients) -> float:
    """`float32_bound` for a weight's gradient, at the size of the largest gradient compared: a sum
    over the batch's `tokens` of products whose factors carry the forward's (and backward's)
    rounding (`forward_bound`'s terms), plus that sum's own rounding (`tokens` terms, one layer).
    The per-token errors are independent, so they add like the rest: the forward's relative error
    survives the sum, and does not grow with `tokens`."""
    magnitude = max(float(g.detach().abs().max()) for g in gradients)
    through_layers = float32_bound(config.hidden_size, magnitude, layers=config.num_hidden_layers + 1)
    return through_layers + float32_bound(tokens, magnitude)


def assert_adam_runs_agree(a, b, *, lr: float, steps: int, atol: float = 1e-5, share: float = 1e-3) -> None:
    """Weights after `steps` Adam steps of two runs whose gradients agree to float32 rounding (the same
    sums in another order). Adam divides by |g|: where g itself is at rounding noise, a 1e-7 change
    can move that weight by up to lr a step. So: all within steps x lr, and all but `share` of the
    weights within `atol`."""
    diff = (a.detach().float() - b.detach().float()).abs()
    assert float(diff.max()) <= steps * lr, f"max difference {float(diff.max()):.3g} > {steps} x lr"
    off = float((diff > atol).float().mean())
    assert off <= share, f"{off:.2%} of the weights differ by more than {atol:g}"
