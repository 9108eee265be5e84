"""The sandbox image recipe: tagged by a hash of what goes in, reused, and a clear error when it
cannot be built."""

from __future__ import annotations

import pytest

from rlvr.sandbox import image, unavailable_reason
from tests.conftest import require


def test_tag_is_a_stable_hash_of_the_recipe():
    assert image.image_tag() == image.image_tag() == f"rlvr-sandbox:{image.recipe_hash()}"
    assert len(image.recipe_hash()) == 16 and int(image.recipe_hash(), 16) >= 0
    # the slow debootstrap part is keyed by the Debian recipe alone, not by the runner
    assert image.base_key() != image.recipe_hash()


def test_building_needs_root_and_debootstrap():
    assert "needs root" in image.build_blocker(1000, "/usr/sbin/debootstrap")
    assert "apt-get install -y debootstrap" in image.build_blocker(0, None)
    assert image.build_blocker(0, "/usr/sbin/debootstrap") is None


@pytest.mark.docker
def test_image_is_present_labelled_and_minimal():
    reason = unavailable_reason()
    require(reason is None, reason or "")
    import docker

    client = docker.from_env(timeout=30)
    built = client.images.get(image.image_tag())
    assert built.labels.get("rlvr.sandbox.recipe") == image.recipe_hash()
    assert image.ensure_image(client) == image.image_tag()  # present: reused, not rebuilt
    listing = client.containers.run(
        image.image_tag(),
        ["sh", "-c", "find / -xdev -perm /6000 -type f; id -u sandbox; ls /opt/rlvr"],
        remove=True,
        network_mode="none",
    )
    assert listing.decode().split() == ["10001", "runner.py", "runner_child.py", "runner_pidns.py", "runner_zygote.py"]
