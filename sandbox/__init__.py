"""Docker execution of untrusted code. Imports nothing of rlvr's other packages.

    with sandbox.DockerSandbox(pool_size=4) as box:
        result = box.run({"main.py": "print(6 * 7)"}, ["python3", "main.py"])
        assert result.ok and result.stdout == "42\\n"

`shared_sandbox()` gives the process-wide pool that environments share. `RaySandbox` runs the
pools in Ray actors (`ray` is imported only when one is made); `use_shared_sandbox(box)` makes
`shared_sandbox()` return it in a worker process."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import SandboxError
from .types import Limits, Result, Sandbox, Status

# The Docker parts load on first use: `import rlvr.sandbox` stays cheap.
_LAZY = {
    "DockerSandbox": "docker_sandbox",
    "shared_sandbox": "docker_sandbox",
    "unavailable_reason": "docker_sandbox",
    "use_shared_sandbox": "docker_sandbox",
    "ensure_image": "image",
    "image_tag": "image",
    "ImageBuildError": "image",
    "RaySandbox": "ray_pool",
    "RayPoolError": "ray_pool",
}

__all__ = [
    "DockerSandbox",
    "shared_sandbox",
    "use_shared_sandbox",
    "unavailable_reason",
    "RaySandbox",
    "RayPoolError",
    "Limits",
    "Result",
    "Sandbox",
    "Status",
    "ensure_image",
    "image_tag",
    "ImageBuildError",
    "SandboxError",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"rlvr.sandbox.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'rlvr.sandbox' has no attribute {name!r}")
