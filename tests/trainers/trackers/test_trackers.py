"""The trackers of `--report-to` (trainers/trackers/opening.py and the tracker modules it opens): each
logs the same per-step metrics, the config once and the sample tables, read back from the files it
wrote with its own reader (TensorBoard's EventAccumulator; wandb's offline run log through wandb's
own protobuf records; trackio's store); `none` writes no tracker files; a tracker that is not
installed is one line before anything loads."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rlvr.trainers.config import ConfigError, TrainConfig
from rlvr.trainers.metrics import MetricsLogger
from rlvr.trainers.samples import COLUMNS, Sample
from rlvr.trainers.trackers.names import EXTRAS, PACKAGES, TRACKERS, split
from rlvr.trainers.trackers.tensorboard import markdown_table
from tests.conftest import require

CONFIG = {"lr": 0.001, "env": "rlvr/Arithmetic-v0", "steps": 3}
SAMPLES = [
    Sample(2, 1, "best", 1.0, "correct", "7", 0, "Compute 3 + 4.", "\\boxed{7}"),
    Sample(2, 1, "worst", 0.0, "incorrect", "7", 0, "Compute 3 + 4.", "a | b\nc"),
]


def log_a_run(out: Path, report_to: str, start_step: int = 0, steps=(1, 2, 3), offset: float = 0.0) -> None:
    """What the training loop logs: train metrics every step (a flag among them, which no tracker
    plots), samples at step 2, an evaluation at the last step."""
    logger = MetricsLogger(out, 3, start_step=start_step, progress=False, report_to=report_to, config=CONFIG)
    for step in steps:
        logger.log(step, {"reward_mean": step / 10 + offset, "skipped": True, "episodes": 4})
        if step == 2:
            logger.log_samples(step, SAMPLES)
    logger.log_eval(steps[-1], {"accuracy": 0.5, "tasks": 4})
    logger.close()


def test_report_to_is_checked_with_the_settings():
    assert split("tensorboard, wandb,tensorboard") == ("tensorboard", "wandb") and split("none") == ()
    assert TrainConfig.from_dict({"report_to": ["tensorboard", "wandb"]}).report_to == "tensorboard,wandb"  # YAML list
    assert TrainConfig().report_to == "tensorboard" and TrainConfig().sample_every == 10
    for bad, says in (("tb", r"unknown tracker\(s\) tb"), ("none,wandb", "cannot be combined"), ("", "must name")):
        with pytest.raises(ConfigError, match=says):
            TrainConfig.from_dict({"report_to": bad})


def test_tensorboard_events_hold_metrics_config_and_samples_and_a_resume_replaces_redone_steps(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    log_a_run(tmp_path, "tensorboard")
    log_a_run(tmp_path, "tensorboard", start_step=2, steps=(3,), offset=1.0)  # resumed at 2, step 3 redone

    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    assert {"train/reward_mean", "train/episodes", "eval/accuracy", "eval/tasks"} <= set(events.Tags()["scalars"])
    assert "train/skipped" not in events.Tags()["scalars"]
    reward = [(e.step, round(e.value, 6)) for e in events.Scalars("train/reward_mean")]
    assert reward == [(1, 0.1), (2, 0.2), (3, 1.3)]  # the redone step 3 once, with its new value

    def text(tag: str) -> dict[int, str]:
        return {e.step: tensor_util.make_ndarray(e.tensor_proto).item().decode() for e in events.Tensors(tag)}

    assert text("samples/text_summary") == {2: markdown_table(COLUMNS, [s.row() for s in SAMPLES])}
    table = text("samples/text_summary")[2]
    assert "| a \\| b<br>c |" in table and table.count("\n") == 3  # header, rule, 2 rows: one line each
    configs = text("config/text_summary")
    assert sorted(configs) == [0, 2] and "lr: 0.001" in configs[0] and "env: rlvr/Arithmetic-v0" in configs[0]


def test_report_to_none_writes_no_tracker_files(tmp_path):
    log_a_run(tmp_path, "none")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.jsonl", "metrics.jsonl", "samples.jsonl"]


def test_each_trackers_extra_installs_its_package():
    """The extra that the missing-tracker line names is one of pyproject.toml's and holds the tracker's package."""
    extras = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    assert set(EXTRAS) == set(PACKAGES) == set(TRACKERS)
    for name, extra in EXTRAS.items():
        assert any(req.split("==")[0] == PACKAGES[name] for req in extras[extra]), (name, extra)


def test_a_tracker_not_installed_is_one_line_before_anything_loads(tmp_path):
    missing = next((n for n in ("wandb", "trackio") if importlib.util.find_spec(n) is None), None)
    if missing is None:
        pytest.skip("wandb and trackio are both installed: no tracker to miss")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    argv = [sys.executable, "-m", "rlvr", "train", "--report-to", f"tensorboard,{missing}", "--out", str(tmp_path)]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip() == (
        f"rlvr train: error: --report-to {missing} needs the `{missing}` extra ({missing} is not installed): "
        f"pip install 'rlvr[{missing}]'"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written: the check came first


# ---- wandb, offline -----------------------------------------------------------------------------
def wandb_records(path: Path) -> list:
    """The records of a wandb run log (`run-ID.wandb`), read with wandb's own protobuf definitions.
    The file is the LevelDB log format behind a 7-byte W&B header: 32 KiB blocks of chunks, each
    a 4-byte checksum, a 2-byte length and a type (1 whole, 2 first, 3 middle, 4 last)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a wandb run log"
    block, pos, pending, records = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:  # zero padding to the block's end
            pos += left - 7 - length
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def test_wandb_offline_run_holds_metrics_config_and_samples(tmp_path, monkeypatch):
    require(importlib.util.find_spec("wandb") is not None, "wandb is not installed (the dev extra pins it)")
    monkeypatch.setenv("WANDB_MODE", "offline")  # nothing leaves this machine
    monkeypatch.setenv("WANDB_PROJECT", "rlvr-test")
    log_a_run(tmp_path, "tensorboard,wandb")  # a list: both trackers
    import wandb

    # run.finish() may return before wandb's service has written the run log (seen with wandb 0.31.0,
    # the first run of a process: the log still its 7-byte header); teardown waits for the service,
    # as the exit of an `rlvr train` process does.
    wandb.teardown()
    assert any((tmp_path / "tensorboard").glob("events.out.tfevents.*"))

    (run_log,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    assert run_log.name == f"run-{(tmp_path / 'wandb-run-id').read_text().strip()}.wandb"
    records = wandb_records(run_log)
    kinds = [r.WhichOneof("record_type") for r in records]
    config = {
        item.key or "/".join(item.nested_key): json.loads(item.value_json)
        for r in records
        if r.WhichOneof("record_type") == "config"
        for item in r.config.update
    }
    assert {k: config[k] for k in CONFIG} == CONFIG
    history = [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
        for r, kind in zip(records, kinds)
        if kind == "history"
    ]
    assert [(h["_step"], h["train/reward_mean"]) for h in history] == [(1, 0.1), (2, 0.2), (3, 0.3)]
    assert all(h["train/episodes"] == 4 and "train/skipped" not in h for h in history)
    assert history[2]["eval/accuracy"] == 0.5
    assert history[1]["samples/_type"] == "table-file" and history[1]["samples/nrows"] == 2
    table = json.loads((run_log.parent / "files" / history[1]["samples/path"]).read_text())
    assert table == {"columns": list(COLUMNS), "data": [s.row() for s in SAMPLES]}
    assert "exit" in kinds  # the run was finished


# ---- trackio ------------------------------------------------------------------------------------
# trackio reads TRACKIO_DIR (where it keeps its runs) when imported: the run and the reading back
# go in a process of their own, its store in the test's folder.
TRACKIO_RUN = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from test_trackers import log_a_run
from pathlib import Path
from trackio.sqlite_storage import SQLiteStorage

out = Path(sys.argv[1])
log_a_run(out, "trackio")
name = (out / "trackio-run").read_text().strip()
logs = SQLiteStorage.get_logs("rlvr-test", name)
print(json.dumps({{"logs": logs, "config": SQLiteStorage.get_run_config("rlvr-test", name)}}, default=str))
"""


def test_trackio_run_holds_metrics_config_and_samples(tmp_path):
    if importlib.util.find_spec("trackio") is None:
        pytest.skip("trackio is not installed (pip install trackio)")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]),
        "TRACKIO_DIR": str(tmp_path / "trackio"),
        "TRACKIO_PROJECT": "rlvr-test",
    }
    p = subprocess.run(
        [sys.executable, "-c", TRACKIO_RUN, str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=300
    )
    assert p.returncode == 0, p.stderr
    found = json.loads(p.stdout.strip().splitlines()[-1])  # the banner is off (not --verbose): one line
    assert len(p.stdout.strip().splitlines()) == 1
    assert {k: found["config"][k] for k in CONFIG} == CONFIG
    logs = found["logs"]
    reward = [(int(r["step"]), r["train/reward_mean"]) for r in logs if "train/reward_mean" in r]
    assert reward == [(1, 0.1), (2, 0.2), (3, 0.3)]
    assert [(int(r["step"]), r["eval/accuracy"]) for r in logs if "eval/accuracy" in r] == [(3, 0.5)]
    (table,) = [r["samples"] for r in logs if "samples" in r]
    assert table["_type"] == "trackio.table" and [list(row.values()) for row in table["_value"]] == [
        s.row() for s in SAMPLES
    ]
