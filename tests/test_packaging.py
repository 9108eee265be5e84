"""Packaging: every folder of the four packages installs under the one import name `rlvr.` (pyproject's
package-dir maps envs/ to rlvr.envs and so on), so the `packages` list names every package folder, and
no bare top-level name (`envs`, `verifiers`, ...) is installed to collide with another distribution's."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_folders() -> dict[str, Path]:
    """Every package the tree holds (a folder with __init__.py under a mapped root), by import name."""
    found = {}
    for name, folder in SETUPTOOLS["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found[".".join([name, *rel.parts])] = init.parent
    return found


def folder_of(name: str) -> Path:
    """The folder a listed package installs from, by the longest package-dir prefix of its name."""
    root = max((n for n in SETUPTOOLS["package-dir"] if name == n or name.startswith(n + ".")), key=len)
    return (
        ROOT / SETUPTOOLS["package-dir"][root] / Path(*name[len(root) :].strip(".").split(".") if name != root else ())
    )


def test_every_package_folder_is_listed_and_every_listed_package_exists():
    listed = set(SETUPTOOLS["packages"])
    assert set(package_folders()) <= listed, set(package_folders()) - listed
    for name in listed - set(package_folders()):  # the rest: folders of package data, no code
        folder = folder_of(name)
        assert folder.is_dir() and not list(folder.glob("*.py")), name


def test_one_import_name():
    assert {name.split(".")[0] for name in SETUPTOOLS["packages"]} == {"rlvr"}
    assert set(SETUPTOOLS["package-dir"]) == {"rlvr", "rlvr.envs", "rlvr.verifiers", "rlvr.sandbox", "rlvr.trainers"}
