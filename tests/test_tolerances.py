"""The float32 rule of tests/tolerances.py, checked on sums whose exact value is known (float64):
every order of summation torch uses stays within half the bound of the truth (so two orders
within the bound), at reduction sizes of a hidden layer (128) to a batch's tokens (4096); and the
bound is not so loose that it could hide a bug (the worst seen is a fair share of it)."""

from __future__ import annotations

import pytest
import torch

from tests.tolerances import FLOAT32_EPS, assert_adam_runs_agree, float32_bound


def orders(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """One dot product, summed in three orders: BLAS's blocking, the vectorised reduction, one by one."""
    products = x * y
    return [torch.dot(x, y), products.sum(), torch.cumsum(products, 0)[-1]]


@pytest.mark.parametrize("n", [128, 640, 4096])
def test_float32_sums_stay_within_the_bound(n):
    g = torch.Generator().manual_seed(n)
    worst = 0.0
    for _ in range(100):
        x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
        truth = float(torch.dot(x.double(), y.double()))
        bound = float32_bound(n, float((x * y).double().norm()))  # the scale: the terms' root-sum-square
        for value in orders(x, y):
            error = abs(float(value) - truth)
            assert error <= bound / 2, f"n={n}: {error:.3g} > half of {bound:.3g}"
            worst = max(worst, error / (bound / 2))
    assert worst > 0.02, f"n={n}: the worst error is {worst:.3f} of half the bound: far too loose"


def test_worked_numbers():
    # 2 x layers x sqrt(terms) x eps x max(magnitude, 1)
    assert float32_bound(128, 10.0, layers=5) == pytest.approx(2 * 5 * 128**0.5 * 2**-23 * 10)
    assert float32_bound(4, 0.001) == 2 * 2 * FLOAT32_EPS  # magnitudes below 1 count as 1
    # the tiny model (hidden 128, 4 layers + the output layer) at |logprob| ~10: AMD EPYC's 1.14e-5 fits 10x
    assert float32_bound(128, 10.0, layers=5) > 10 * 1.14e-5


def test_adam_runs_agree_allows_what_adam_does_and_no_more():
    a = torch.zeros(10_000)
    b = a.clone()
    b[0] = 2e-3  # one weight whose gradient was at rounding noise: up to lr per step
    assert_adam_runs_agree(a, b, lr=1e-3, steps=3)
    with pytest.raises(AssertionError, match="x lr"):
        assert_adam_runs_agree(a, b, lr=1e-3, steps=1)
    b[:100] = 1e-4  # 1% of the weights off: a real difference
    with pytest.raises(AssertionError, match="differ by more than"):
        assert_adam_runs_agree(a, b, lr=1e-3, steps=3)
