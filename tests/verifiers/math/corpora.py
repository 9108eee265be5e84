"""The labelled corpora of tests/data and what each row expects of the verifier.

A row is `{"category", "gold", "response", "expected"}`. Rows written before issue 38 made an
answer marker required may carry `"lenient_only": true`: a right answer stated without a marker
("So there are 12 ways in total."), paid only with `MathOptions(require_marker=False)` and not by
default. One row carries `"relabelled"`, the reason its label changed with the grammar."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.verifiers.math import MathOptions

DATA = Path(__file__).resolve().parents[2] / "data"
LENIENT = MathOptions(require_marker=False)
KEYS = {"category", "gold", "response", "expected"}
OPTIONAL_KEYS = {"lenient_only", "relabelled"}


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def expected(row: dict) -> bool:
    """The label under the default options: a lenient-only answer is not paid by default."""
    return bool(row["expected"]) and not row.get("lenient_only", False)
