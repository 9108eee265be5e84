"""The import graph of rlvr's own modules: no circles, and the layers' arrows point one way.

Read from the source with `ast`, not by importing, so that every import counts: module-level and
deferred (inside functions), `import a.b as c`, `from . import x`, relative imports, and the string
tables of lazy imports (`importlib.import_module("rlvr.x")`, a package `__getattr__` whose table maps
names to module strings, `import_module(f"rlvr.commands.{name}")`, read as every module under that
prefix). Imports under `if TYPE_CHECKING:` are left out (they never run).

Edges:
- a package's `__init__` importing its own submodules is an edge (a facade that needs its parts,
  and a part that needs the facade, is a circle of design);
- `pkg.sub` importing a name that `pkg/__init__` defines or re-exports (`from rlvr.verifiers import
  Verdict`) is an edge to `pkg`: the submodule depends on the facade. `from pkg import sub2` is an
  edge to `pkg.sub2` only: it needs that module, not the facade. The implicit import of a parent
  package that Python makes before any submodule is NOT an edge: every submodule has one, and it
  runs only the parent's own top-level code, whose imports are edges of the parent already.

Module names follow pyproject's package-dir: the folders envs/ verifiers/ sandbox/ trainers/ are
`rlvr.envs`, `rlvr.verifiers`, `rlvr.sandbox`, `rlvr.trainers`. A string that names a project module
which does not exist (an old bare `sandbox.x` after the rename) is a failure of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {
    "rlvr": "rlvr",
    "rlvr.envs": "envs",
    "rlvr.verifiers": "verifiers",
    "rlvr.sandbox": "sandbox",
    "rlvr.trainers": "trainers",
}  # pyproject [tool.setuptools] package-dir
OLD_NAMES = ("envs", "verifiers", "sandbox", "trainers")  # the bare names before `rlvr.`: none may remain
# The layers, lowest first: a module may import its own layer and those below, never one above.
LAYERS = ("rlvr.sandbox", "rlvr.verifiers", "rlvr.envs", "rlvr.trainers")
NO_TORCH = ("rlvr.sandbox", "rlvr.verifiers", "rlvr.envs")  # ARCHITECTURE.md: envs/verifiers/sandbox never import torch


def module_files() -> dict[str, Path]:
    """Module name -> file, for every .py of the packages (shipped assets, which are data, left out)."""
    files = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            if "assets" in rel.parts or "__pycache__" in rel.parts:
                continue
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if package == "rlvr" and parts and parts[0] in OLD_NAMES:
                continue  # not a package of its own
            files[name] = path
    return files


FILES = module_files()
MODULES = set(FILES)


def project_module(name: str) -> str | None:
    """The project module `name` is, or is in (`rlvr.x.Y` -> `rlvr.x`); None outside the project."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def looks_like_project(name: str) -> bool:
    return name.split(".")[0] in ("rlvr", *OLD_NAMES)


def type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def string_constants(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def dynamic_targets(call: ast.Call) -> list[str]:
    """The modules an `importlib.import_module(...)` / `__import__(...)` call may import: a string,
    or an f-string's constant prefix (every module under it)."""
    func = ast.unparse(call.func)
    if not call.args or func.rpartition(".")[2] not in ("import_module", "__import__"):
        return []
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        if prefix.endswith("."):
            return [m for m in MODULES if m.startswith(prefix)] or [prefix + "*"]
    return []


def lazy_tables(tree: ast.Module) -> list[str]:
    """The module strings of a module-level table (`_WHERE = {"Name": "rlvr.x.y"}`) in a module that
    imports lazily, i.e. defines `__getattr__`; a value without dots is a submodule of this package."""
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Dict, ast.Set)):
            values = node.value.values if isinstance(node.value, ast.Dict) else node.value.elts
            found += [s for v in values for s in string_constants(v)]
    return found


def imports_of(name: str, path: Path) -> list[tuple[str, int]]:
    """(imported name, made absolute; line) for every import the module at `path` makes."""
    return imports_in(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")


def imports_in(source: str, name: str, is_package: bool) -> list[tuple[str, int]]:
    """(imported name, made absolute; line) for every import in `source`, the module `name`."""
    tree = ast.parse(source)
    skip = type_checking_nodes(tree)
    package = name if is_package else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module or ""
            # `from pkg import sub` needs the submodule; `from pkg import Name`, what pkg defines
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            found += [(s, node.lineno) for s in subs]
            if len(subs) < len(node.names):
                found.append((base, node.lineno))
        elif isinstance(node, ast.Call):
            found += [(t, node.lineno) for t in dynamic_targets(node)]
    table = lazy_tables(tree)
    line = next((n.lineno for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"), 0)
    found += [(t if "." in t else f"{package}.{t}", line) for t in table]
    return found


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """(edges between project modules, strings that name a project module that does not exist)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    missing = []
    for name, path in FILES.items():
        for target, line in imports_of(name, path):
            resolved = project_module(target)
            if resolved is None:
                if looks_like_project(target) and not _external(target):
                    missing.append(f"{path.relative_to(REPO)}:{line} imports {target!r}")
                continue
            if resolved != name:
                edges[name].add(resolved)
    return edges, missing


def _external(target: str) -> bool:
    """An installed module that is not ours (the sandbox's shipped files run as their own programs)."""
    top = target.split(".")[0]
    return top != "rlvr" and top not in OLD_NAMES


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


EDGES, MISSING = graph()


def layer(module: str) -> int | None:
    return next((i for i, top in enumerate(LAYERS) if module == top or module.startswith(top + ".")), None)


def test_the_graph_is_read():
    """The reader sees what is there: a sample of known edges, deferred and lazy ones included."""
    assert len(MODULES) > 100
    assert "rlvr.trainers.samplers.vllm_sampler" in EDGES["rlvr.trainers.samplers"]  # a __getattr__ table
    assert "rlvr.commands.eval" in EDGES["rlvr.cli"]  # import_module(f"rlvr.commands.{name}")
    assert "rlvr.trainers.models" in EDGES["rlvr.commands.eval"]  # inside a function
    assert "rlvr.envs.core" in EDGES["rlvr.trainers.tiny.model"]


def test_no_import_names_a_missing_project_module():
    """`importlib.import_module("sandbox.x")` kept from before the `rlvr.` names fails only when called."""
    assert MISSING == []


def test_no_import_circles():
    found = circles(EDGES)
    assert found == [], "import circles (strongly connected components):\n" + "\n".join(" ".join(c) for c in found)


@pytest.mark.parametrize("package", LAYERS[:-1])
def test_lower_layers_never_import_higher_ones(package):
    """trainers -> envs -> verifiers -> sandbox, never the other way (ARCHITECTURE.md)."""
    own = layer(package)
    wrong = sorted(
        f"{m} -> {t}" for m in EDGES if layer(m) == own for t in EDGES[m] if layer(t) is not None and layer(t) > own
    )
    assert wrong == []


def room_of(module: str, rooms) -> str | None:
    return next((r for r in rooms if module == r or module.startswith(r + ".")), None)


# The rooms (sub-packages) and what each may import of the project outside itself: a prefix list.
# kernels are config-free maths; trackers know only the config; the tiny builders make models and
# tasks, never a training step; the rollout engine runs on the env contract; the environments are
# built on the contract and the verifiers, never on the engine or the agent room.
# The adapters (TRL, verl) make and score tasks through the contract and the registry only: the
# environments they serve are found by id, never imported. So are those the OpenEnv server serves (the remote room),
# whose client plays them through the contract's spaces and errors.
ROOM_OUTS = {
    "rlvr.trainers.kernels": (),
    "rlvr.trainers.trackers": ("rlvr.errors", "rlvr.trainers.config"),
    "rlvr.trainers.tiny": ("rlvr.envs", "rlvr.trainers.model_names"),
    "rlvr.envs.rollout": ("rlvr.envs.core", "rlvr.envs.episode", "rlvr.envs.registry", "rlvr.envs.sampler",
                          "rlvr.envs.chat_template", "rlvr.verifiers.verdict", "rlvr.errors"),
    "rlvr.envs.tasks": ("rlvr.envs.core", "rlvr.envs.tool_env", "rlvr.envs.tools", "rlvr.verifiers", "rlvr.sandbox",
                        "rlvr.errors"),
    "rlvr.envs.adapters": ("rlvr.envs.core", "rlvr.envs.registry", "rlvr.envs.eval_tasks", "rlvr.verifiers.verdict"),
    "rlvr.envs.remote": ("rlvr.envs.core", "rlvr.envs.registry", "rlvr.verifiers.verdict", "rlvr.errors"),
}  # fmt: skip
# The Trainer's own parts: a sampler backend never reaches back into the run that drives it.
TRAINER_PARTS = ("rlvr.trainers.loop", "rlvr.trainers.api", "rlvr.trainers.drivers", "rlvr.trainers.run_control",
                 "rlvr.trainers.step_rollout", "rlvr.trainers.step_prepare", "rlvr.trainers.evaluation",
                 "rlvr.trainers.update", "rlvr.trainers.phases")  # fmt: skip
ENV_ROOMS = ("rlvr.envs.adapters", "rlvr.envs.agent", "rlvr.envs.remote", "rlvr.envs.rollout", "rlvr.envs.tasks")


@pytest.mark.parametrize("room", sorted(ROOM_OUTS))
def test_each_room_imports_only_what_it_may(room):
    allowed = ROOM_OUTS[room]
    wrong = sorted(
        f"{m} -> {t}"
        for m in EDGES
        if room_of(m, [room])
        for t in EDGES[m]
        if not room_of(t, [room]) and not room_of(t, allowed)
    )
    assert wrong == []


def test_the_env_contract_stands_alone():
    """The modules a user reads to write an environment (envs/*.py) import no room of envs: not the
    engine, not the environments, not the agent room (its env is found through the registry's
    entry point). Only the package's facade re-exports the engine's `rollout`."""
    contract = [m for m in EDGES if m.startswith("rlvr.envs.") and not room_of(m, ENV_ROOMS)]
    assert len(contract) > 10
    wrong = sorted(f"{m} -> {t}" for m in contract for t in EDGES[m] if room_of(t, ENV_ROOMS))
    assert wrong == []
    assert (
        sorted(m for m in EDGES if room_of(m, ENV_ROOMS) is None for t in EDGES[m] if room_of(t, ["rlvr.envs.agent"]))
        == []
    )


def test_samplers_never_reach_into_the_trainer():
    wrong = sorted(
        f"{m} -> {t}" for m in EDGES if room_of(m, ["rlvr.trainers.samplers"]) for t in EDGES[m] if t in TRAINER_PARTS
    )
    assert wrong == []


def test_only_the_api_and_the_command_build_a_trainer():
    assert sorted(m for m, targets in EDGES.items() if "rlvr.trainers.loop" in targets) == [
        "rlvr.commands.train",
        "rlvr.trainers.api",
    ]


@pytest.mark.parametrize("package", NO_TORCH)
def test_no_torch_below_trainers(package):
    wrong = sorted(
        f"{FILES[m].relative_to(REPO)}:{line}"
        for m in FILES
        if layer(m) == layer(package)
        for target, line in imports_of(m, FILES[m])
        if target.split(".")[0] == "torch"
    )
    assert wrong == []


def test_the_reader_sees_every_form_of_import():
    source = """
from __future__ import annotations
import importlib
import rlvr.envs.core as core
from typing import TYPE_CHECKING
from . import loop
from .. import errors
from .batch import collate
from rlvr.verifiers import Verdict, math
if TYPE_CHECKING:
    from rlvr.cli import main
_WHERE = {"X": "rlvr.sandbox.image", "Y": "policy"}
def __getattr__(name):
    return importlib.import_module(_WHERE[name])
def later():
    import rlvr.trainers.quiet
    return importlib.import_module(f"rlvr.commands.{name}")
"""
    found = {project_module(t) for t, _ in imports_in(source, "rlvr.trainers.x", is_package=False)} - {None}
    assert found == {
        "rlvr.envs.core",
        "rlvr.trainers.loop",
        "rlvr.errors",
        "rlvr.trainers.batch",
        "rlvr.verifiers",
        "rlvr.verifiers.math",
        "rlvr.sandbox.image",
        "rlvr.trainers.policy",
        "rlvr.trainers.quiet",
        *(m for m in MODULES if m.startswith("rlvr.commands.")),
    }  # not rlvr.cli: TYPE_CHECKING
    assert looks_like_project("sandbox.docker_sandbox") and project_module("sandbox.docker_sandbox") is None


def test_circles_are_found():
    """The counter itself: a made-up graph with one circle of three and a self-contained tail."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert circles(edges) == [["a", "b", "c"]]
    chain = {str(i): {str(i + 1)} for i in range(5000)} | {"5000": {"0"}}  # iterative: no recursion limit
    assert circles(chain) == [sorted(chain)]
