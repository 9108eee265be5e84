"""Rewards that check work: math equivalence (SymPy), code against tests (sandbox), format checks,
weighted composition. Never imports envs or trainers."""
from verifiers.verdict import Outcome, Verdict, VerifierError

__all__ = ["Outcome", "Verdict", "VerifierError"]
