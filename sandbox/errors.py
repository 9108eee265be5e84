"""`RlvrError`: the root of every error rlvr raises on purpose, so that a caller catches them all
with one clause (`except RlvrError`) and the CLI turns each into one line. It lives here, in the
lowest package, because every package may import downwards (trainers -> envs -> verifiers ->
sandbox) and none upwards; each package derives its own bases from it."""
from __future__ import annotations


class RlvrError(Exception):
    """Base class of every error rlvr raises on purpose (bad input, a missing component)."""


class SandboxError(RlvrError):
    """Base class of the sandbox's own errors."""
