"""`rlvr export`: the file it writes and the lines it prints, and bad input as one line, `rlvr export:
error: ...`, exit code 2, with nothing lost: checked before any task is made, and a file that was there
stays as it was. Run by the CLI's entry point in this process (`tests.conftest.rlvr_here`)."""

from __future__ import annotations

import os
import resource

import pyarrow.parquet as pq
import pytest

from tests.conftest import read_only_dir, rlvr_here
from tests.rlvr.test_bad_input import assert_one_line_error

ARITHMETIC = ["--env", "rlvr/Arithmetic-v0"]


def test_export_writes_the_rows_and_says_how_to_use_them(tmp_path, capsys):
    out = tmp_path / "new" / "val.parquet"  # its folder is made
    argv = ["export", *ARITHMETIC, "--env-arg", "difficulty=1", "--tasks", "3", "--start", "1000000"]
    done = rlvr_here(capsys, *argv, "--format", "verl", "--out", out)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == f"wrote 3 tasks of rlvr/Arithmetic-v0 to {out} (verl format)"
    assert "custom_reward_function.name=compute_score" in second and f"data.val_files={out}" in second
    path = second.split("custom_reward_function.path=")[1].split()[0]
    assert path.endswith(os.path.join("envs", "adapters", "verl.py")) and os.path.isfile(path)
    rows = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["task_id"] for r in rows] == ["1000000", "1000001", "1000002"]
    assert '"env_args":{"difficulty":1}' in rows[0]["reward_model"]["ground_truth"]
    assert sorted(os.listdir(out.parent)) == ["val.parquet"]  # no temporary file left


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A file, a folder, and a read-only folder (a read-only tmpfs as root, whom permission bits don't stop)."""
    root = tmp_path_factory.mktemp("export")
    (root / "a_file").write_text("not a directory")
    (root / "a_folder.parquet").mkdir()
    with read_only_dir(root / "read_only"):
        yield root


BAD = {  # (flags, problem named)
    "unknown env": (["--env", "rlvr/Arithmetc-v0", "--tasks", "2"], "unknown environment 'rlvr/Arithmetc-v0'"),
    "multi-turn env": (["--env", "rlvr/GuessNumber-v0", "--tasks", "2"], "is a multi-turn environment"),
    "bad env arg": ([*ARITHMETIC, "--tasks", "2", "--env-arg", "difficulty=9"], "difficulty must be 1..5"),
    "no count": ([*ARITHMETIC], "generates its tasks: say how many"),
    "zero tasks": ([*ARITHMETIC, "--tasks", "0"], "--tasks must be at least 1, got 0"),
    "negative start": ([*ARITHMETIC, "--tasks", "2", "--start", "-1"], "--start must be >= 0, got -1"),
    "bad format": ([*ARITHMETIC, "--tasks", "2", "--format", "csv"], "--format must be one of verl, trl, got 'csv'"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_the_old_file_is_kept(tmp_path, capsys, case):
    flags, problem = BAD[case]
    out = tmp_path / "train.parquet"
    out.write_bytes(b"what was there")
    argv = ["export", *flags, "--out", out] + ([] if "--format" in flags else ["--format", "verl"])
    assert_one_line_error(rlvr_here(capsys, *argv), "export", problem)
    assert out.read_bytes() == b"what was there" and os.listdir(tmp_path) == ["train.parquet"]


OUT_CASES = {
    "a_file/x.parquet": "which is a file, not a directory",
    "read_only/x.parquet": "is read-only",
    "a_folder.parquet": "is a directory, not a file",
    "x.csv": "must name a .parquet file",
}


@pytest.mark.parametrize("out", OUT_CASES)
def test_an_unwritable_out_is_one_line(place, capsys, out):
    done = rlvr_here(capsys, "export", *ARITHMETIC, "--tasks", "2", "--format", "verl", "--out", place / out)
    assert_one_line_error(done, "export", OUT_CASES[out])


def test_a_write_that_fails_midway_keeps_the_old_file(tmp_path, capsys):
    out = tmp_path / "train.parquet"
    out.write_bytes(b"what was there")
    # This process's file-size limit while it writes (Python ignores SIGXFSZ: a write past it is EFBIG), restored
    # after: 3000 tasks are about 140 KB of Parquet.
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, hard))
    try:
        done = rlvr_here(capsys, "export", *ARITHMETIC, "--tasks", "3000", "--format", "verl", "--out", out)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    line = assert_one_line_error(done, "export", f"could not write {out}: ")
    assert "File too large" in line and "nothing was written in its place" in line
    assert out.read_bytes() == b"what was there" and os.listdir(tmp_path) == ["train.parquet"]
