"""`SandboxError`: the base of the sandbox's own errors (under the project's root, `rlvr.errors.RlvrError`)."""

from __future__ import annotations

from rlvr.errors import RlvrError


class SandboxError(RlvrError):
    """Base class of the sandbox's own errors."""
