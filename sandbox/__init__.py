"""Docker execution of untrusted code. Imports nothing of rlvr's other packages.

    with sandbox.DockerSandbox(pool_size=4) as box:
        result = box.run({"main.py": "print(6 * 7)"}, ["python3", "main.py"])
        assert result.ok and result.stdout == "42\\n"

`shared_sandbox()` gives the process-wide pool that environments share."""
from __future__ import annotations

import importlib
from typing import Any

from .errors import RlvrError, SandboxError
from .types import Limits, Result, Status

# The Docker parts load on first use: `import sandbox` (for its error root) stays cheap.
_LAZY = {"DockerSandbox": "docker_sandbox", "shared_sandbox": "docker_sandbox", "unavailable_reason": "docker_sandbox",
         "ensure_image": "image", "image_tag": "image", "ImageBuildError": "image"}

__all__ = ["DockerSandbox", "shared_sandbox", "unavailable_reason", "Limits", "Result", "Status", "ensure_image",
           "image_tag", "ImageBuildError", "RlvrError", "SandboxError"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"sandbox.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
