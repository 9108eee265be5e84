"""`runner_child.remove_tree`, the walk that empties a run's directory after every run (the runner
does it in its own process now, so its bounds are what keeps a hostile tree from stalling it):
no recursion at any depth, permissions the program took away given back, and a stop with
TreeTooLarge at the entry, depth and time bounds, after which the runner replaces the container."""

from __future__ import annotations

import os
import time

import pytest

from rlvr.sandbox.runner_child import TreeTooLarge, remove_tree


def chain(root, depth: int) -> None:
    path = root
    for _ in range(depth):
        path = path / "d"
        path.mkdir()
    (path / "leaf").write_text("x")


def test_a_tree_is_removed_whole_and_counted(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    chain(root, 5)
    (root / "a.txt").write_text("a")
    os.symlink("/etc/passwd", root / "link")  # removed as a link, never followed
    os.chmod(root / "d" / "d", 0)  # taken away by the program: given back, then removed
    removed, deepest = remove_tree(str(root), 64, 64, time.monotonic() + 5)
    assert not root.exists() and os.path.exists("/etc/passwd")
    assert (removed, deepest) == (1 + 1 + 5 + 1 + 1, 5)  # the file, the link, 5 directories, the leaf, the root


def test_a_chain_deeper_than_the_bound_stops_the_walk(tmp_path):
    (tmp_path / "run").mkdir()
    chain(tmp_path / "run", 70)
    with pytest.raises(TreeTooLarge, match="deep"):
        remove_tree(str(tmp_path / "run"), 4096, 64, time.monotonic() + 5)
    # Unbounded (as the next run's child calls it) the same tree goes, past any recursion limit.
    assert remove_tree(str(tmp_path / "run"))[1] == 70


def test_more_entries_than_the_bound_stop_the_walk(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    for i in range(300):
        (root / f"f{i}").write_text("")
    with pytest.raises(TreeTooLarge, match="entries"):
        remove_tree(str(root), 100, 64, time.monotonic() + 5)
    assert root.exists() and len(os.listdir(root)) < 300


def test_the_walk_stops_at_its_deadline(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    (root / "f").write_text("")
    with pytest.raises(TreeTooLarge, match="in time"):
        remove_tree(str(root), 4096, 64, time.monotonic() - 1)
