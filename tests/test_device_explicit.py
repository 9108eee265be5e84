"""Every training run in the suite says where it runs: checked by reading the suite (ast), so a GPU
machine is not needed to know that the suite will behave on one.

Why: `--device auto` is CUDA wherever torch sees a GPU. A test that leaves the device to `auto` and
then meets something of its own on the CPU (a model it loads, a head it builds, tensors it
compares) passes here and fails there ("Expected all tensors to be on the same device"; 12 of 78
training tests did on an H100). So a test says which it means: `device="cpu"` when it is about
the CPU (bf16 weights, Ray's CPU workers, gloo ranks), or `train_device()` / the `train_device`
fixture (tests/conftest.py) when it exercises the device, building its own models and heads on
the model's device and comparing after `.cpu()`.

The rules:
1. The config only places models through `build_models` (trainers/model_set.py): nothing else in
   the library reads a config's `device` but the checks before a run (preflight, `rlvr train`'s
   bf16 check, the memory estimate), listed in `DEVICE_READERS`. Checked below: the other rules
   rest on it.
2. So every `Trainer(...)` and `build_models(...)` call in tests/ gets a config that states its
   device: a `TrainConfig(...)` / `TrainConfig.from_dict(...)` / helper call with `device=`, a
   dict with a "device" key (directly or spread from a module constant or a local that has one), a
   helper whose own body states it (`config(tmp_path, ...)`-style fixtures: they inherit it), or a
   parameter whose every caller in tests/ passes such a config. A `TrainConfig(...)` that never
   reaches them (validation, `check_settings`, the phase functions given models the test built)
   places nothing and needs no device.
3. Every `rlvr train` command in tests/ that trains states `--device` (the CLI's default is
   `auto`), unless it only checks (`--check`), its test expects it to stop before training (it
   asserts a non-zero exit: bad input fails before anything loads), or its module is listed in
   `COMMAND_EXEMPT` with the reason: the commands that compare numbers (resume, CLI vs in-process
   runs) must not silently change device with the machine.
Models a test loads itself (`load_causal_lm`, `random_qwen2`, `Qwen2ForCausalLM(config)`) take no
device: they are on the CPU by construction, and a test moves them (`.to(model_device(policy))`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
BUILDERS = {"Trainer", "build_models"}  # what turns a config into models on its device
# Where the library may read a config's device, and why (rule 1).
DEVICE_READERS = {
    "trainers/model_set.py": "build_models: every model is loaded onto the config's device",
    "trainers/preflight.py": "the check before a run: a GPU this machine lacks is a typed error",
    "rlvr/commands/train.py": "`--dtype bfloat16` on a CPU without bf16 instructions: float32, said in one line",
    "trainers/config.py": "validate(): the spelling of the setting",
    "trainers/memory_estimate.py": "the peak-memory arithmetic: the device's kind sets bytes per value; places nothing",
    "trainers/memory_plan.py": "the peak-memory estimate before loading: which device's memory; places nothing",
}
# Modules whose `rlvr train` commands may leave `--device` to `auto`, and why (rule 3).
COMMAND_EXEMPT = {
    "tests/test_readme_commands.py": "the README's commands, run as a user types them (auto); loose learning bounds",
    "tests/trainers/test_learning.py": "`rlvr train` as a user runs it (auto); loose learning bounds, no run compared",
    "tests/rlvr": "the CLI's behaviour (exit codes, one-line errors, locks, output); no numbers compared",
    "tests/test_light_core.py": "rlvr train where torch is not installed: it stops at the missing-extra line",
}


def test_only_build_models_places_a_config_on_its_device():
    readers = set()
    for path in [*ROOT.glob("trainers/**/*.py"), *ROOT.glob("rlvr/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "device" and isinstance(node.ctx, ast.Load):
                owner = ast.unparse(node.value)
                if owner.split(".")[-1] in ("config", "cfg", "self", "train_config"):
                    readers.add(str(path.relative_to(ROOT)))
    assert readers <= set(DEVICE_READERS), (
        f"read a config's device outside build_models: {readers - set(DEVICE_READERS)}"
    )
    assert "trainers/model_set.py" in readers


# ---- the suite's modules, parsed once --------------------------------------------------------------
class Module:
    def __init__(self, path: Path):
        self.path = path
        self.name = str(path.relative_to(ROOT))
        self.tree = ast.parse(path.read_text())
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.constants = {
            t.id: n.value
            for n in self.tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        self.imported = {  # name -> module path, for `from tests.x import name`
            alias.asname or alias.name: node.module
            for node in ast.walk(self.tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests")
            for alias in node.names
        }

    def enclosing_function(self, node: ast.AST):
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None


MODULES = {m.name: m for m in (Module(p) for p in sorted(TESTS.rglob("*.py")))}


def module_of(dotted: str) -> Module | None:
    base = dotted.replace(".", "/")
    return MODULES.get(f"{base}.py") or MODULES.get(f"{base}/__init__.py")


def callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def names_device(node: ast.AST) -> bool:
    """A `device=` keyword or a "device" key anywhere in `node`."""
    for n in ast.walk(node):
        if isinstance(n, ast.keyword) and n.arg == "device":
            return True
        if isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "device" for k in n.keys):
            return True
    return False


def states(expr: ast.AST, module: Module, function, seen: frozenset = frozenset()) -> bool:
    """Whether the config expression `expr` (in `function` of `module`) states its device (rule 2)."""
    if names_device(expr):
        return True
    for n in ast.walk(expr):  # spreads and names inside: a module constant, a local, a parameter
        if isinstance(n, ast.Name) and (module.name, n.id, id(function)) not in seen:
            key = (module.name, n.id, id(function))
            if n.id in module.constants and names_device(module.constants[n.id]):
                return True
            if function is not None and local_states(n.id, module, function, seen | {key}):
                return True
        if isinstance(n, ast.Call) and helper_states(callee(n), module, seen):
            return True
    return False


def local_states(name: str, module: Module, function, seen) -> bool:
    for n in ast.walk(function):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            if states(n.value, module, function, seen):
                return True
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
    if name in params:  # every caller in the suite must pass a config that states it
        callers = list(calls_of(function.name, module))
        return bool(callers) and all(caller_states(c, m, f, params.index(name), name, seen) for c, m, f in callers)
    return False


def calls_of(name: str, home: Module):
    for m in MODULES.values():
        if m is not home and m.imported.get(name) is None:
            continue
        for n in ast.walk(m.tree):
            if isinstance(n, ast.Call) and callee(n) == name:
                yield n, m, m.enclosing_function(n)


def caller_states(call: ast.Call, module: Module, function, index: int, name: str, seen) -> bool:
    for kw in call.keywords:
        if kw.arg == name:
            return states(kw.value, module, function, seen)
    return index < len(call.args) and states(call.args[index], module, function, seen)


def helper_states(name: str, module: Module, seen) -> bool:
    """A helper (a `config(tmp_path, ...)`-style function of this module or imported from tests/)
    whose own body states the device: every config it makes inherits it."""
    home = module if name in module.functions else module_of(module.imported.get(name, ""))
    if home is None or name not in home.functions:
        return False
    return names_device(home.functions[name]) or any(
        isinstance(n, ast.Name) and n.id in home.constants and names_device(home.constants[n.id])
        for n in ast.walk(home.functions[name])
    )


def test_every_training_config_in_the_suite_states_its_device():
    missing = []
    for module in MODULES.values():
        if module.name == "tests/test_device_explicit.py":
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and callee(node) in BUILDERS and node.args:
                if not states(node.args[0], module, module.enclosing_function(node)):
                    missing.append(f"{module.name}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not missing, "training configs without a device (say device=..., see the docstring):\n" + "\n".join(missing)


# ---- rule 3: commands ------------------------------------------------------------------------------
def train_commands(module: Module):
    """Sequences (list and tuple literals, a call's positional arguments) that spell an `rlvr train`
    command: "train" after "rlvr", or first (`main(["train", ...])`, `run("train", ...)`)."""
    for node in ast.walk(module.tree):
        items = (
            node.elts if isinstance(node, (ast.List, ast.Tuple)) else node.args if isinstance(node, ast.Call) else []
        )
        words = [x.value if isinstance(x, ast.Constant) else None for x in items]
        for i, word in enumerate(words):
            if word == "train" and (i == 0 or words[i - 1] == "rlvr"):
                yield node, items
                break


def spelled(items, module: Module) -> set[str]:
    """The constant words of a command, with those of the module's lists it unpacks (`*SHORT`)."""
    words = set()
    for x in items:
        if isinstance(x, ast.Constant) and isinstance(x.value, str):
            words.add(x.value)
        elif isinstance(x, ast.Starred) and isinstance(x.value, ast.Name) and x.value.id in module.constants:
            value = module.constants[x.value.id]
            if isinstance(value, (ast.List, ast.Tuple)):
                words |= spelled(value.elts, module)
    return words


# `assert p.returncode == 2`, `assert rc != 0`, `assert main([...]) == 2`: the command is expected to fail
FAILS = re.compile(r"(returncode|\brc|main\(.*\))\s*(==\s*[1-9]|!=\s*0)")


def expects_failure(node: ast.AST, module: Module) -> bool:
    function = module.enclosing_function(node)
    asserts = [] if function is None else [n for n in ast.walk(function) if isinstance(n, ast.Assert)]
    return any(FAILS.search(ast.unparse(a.test)) for a in asserts)


def test_every_rlvr_train_command_states_its_device():
    missing = []
    for module in MODULES.values():
        if any(module.name == e or module.name.startswith(e + "/") for e in COMMAND_EXEMPT):
            continue
        for node, items in train_commands(module):
            words = spelled(items, module)
            if not words & {"--device", "--check"} and not expects_failure(node, module):
                missing.append(f"{module.name}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not missing, "`rlvr train` commands without --device (see the docstring):\n" + "\n".join(missing)


def test_the_scan_sees_what_it_checks():
    """The scan is not vacuous: it finds the suite's trainers and commands, and it flags a config
    without a device, and a command without --device."""
    builders = sum(
        isinstance(n, ast.Call) and callee(n) in BUILDERS for m in MODULES.values() for n in ast.walk(m.tree)
    )
    commands = sum(1 for m in MODULES.values() for _ in train_commands(m))
    assert builders > 30 and commands > 10, (builders, commands)
    probe = Module.__new__(Module)
    source = "def f(tmp_path):\n    cfg = TrainConfig.from_dict(dict(model='tiny'))\n    return Trainer(cfg)\n"
    probe.name, probe.tree = "probe.py", ast.parse(source)
    probe.parents = {c: n for n in ast.walk(probe.tree) for c in ast.iter_child_nodes(n)}
    probe.functions, probe.constants, probe.imported = {"f": probe.tree.body[0]}, {}, {}
    trainer = probe.tree.body[0].body[-1].value
    assert not states(trainer.args[0], probe, probe.tree.body[0])
    probe.tree = ast.parse(source.replace("model='tiny'", "model='tiny', device='cpu'"))
    trainer = probe.tree.body[0].body[-1].value
    assert states(trainer.args[0], probe, probe.tree.body[0])
    (command,) = ast.parse("main(['train', '--steps', '2'])").body
    assert not spelled(command.value.args[0].elts, probe) & {"--device", "--check"}
    for exit_code, fails in (("2", True), ("0", False)):
        probe.tree = ast.parse(f"def f():\n    p = run(['rlvr', 'train'])\n    assert p.returncode == {exit_code}\n")
        probe.parents = {c: n for n in ast.walk(probe.tree) for c in ast.iter_child_nodes(n)}
        ((node, _),) = train_commands(probe)
        assert expects_failure(node, probe) is fails
