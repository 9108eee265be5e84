"""Docker execution of untrusted code. Imports nothing of rlvr's other packages.

    with sandbox.DockerSandbox(pool_size=4) as box:
        result = box.run({"main.py": "print(6 * 7)"}, ["python3", "main.py"])
        assert result.ok and result.stdout == "42\\n"

`shared_sandbox()` gives the process-wide pool that environments share."""
from .docker_sandbox import DockerSandbox, shared_sandbox, unavailable_reason
from .image import ImageBuildError, ensure_image, image_tag
from .types import Limits, Result, Status

__all__ = ["DockerSandbox", "shared_sandbox", "unavailable_reason", "Limits", "Result", "Status", "ensure_image",
           "image_tag", "ImageBuildError"]
