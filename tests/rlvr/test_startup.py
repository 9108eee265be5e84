"""The collector policy of a run's start and exit (`rlvr.startup`): paused while the heap is
built, then one collection and a freeze; at a program's exit, a frozen heap."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from rlvr.startup import collector_paused

ROOT = Path(__file__).resolve().parents[2]


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture
def restore_collector():
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()  # the frozen objects go back to the oldest generation, collectable again
    (gc.enable if was_enabled else gc.disable)()


def garbage_left_after_allocating() -> bool:
    """Whether a fresh unreachable cycle survives 10,000 new containers (enough allocations for
    automatic collections, whenever the collector is on)."""
    dead = weakref.ref(Node())
    survivors = [[] for _ in range(10_000)]
    assert survivors
    return dead() is not None


def test_the_collector_is_paused_in_the_block_then_frees_the_garbage_and_freezes_the_rest(restore_collector):
    gc.enable()
    assert not garbage_left_after_allocating()  # the control: an automatic collection freed it
    with collector_paused():
        assert not gc.isenabled()
        kept = Node()
        dead = weakref.ref(Node())
        assert garbage_left_after_allocating()  # no collection ran
        frozen_before = gc.get_freeze_count()
    assert gc.isenabled()
    assert dead() is None  # the one collection at the end freed the cycle
    assert gc.get_freeze_count() > frozen_before  # what lives is frozen: later collections skip it
    assert not any(o is kept for o in gc.get_objects())  # frozen objects are in no generation


def test_the_collector_comes_back_as_it_was_after_an_error(restore_collector):
    gc.enable()
    with pytest.raises(ValueError):
        with collector_paused():
            raise ValueError("a failed start")
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()  # a caller that had it off keeps it off


EXIT_PROGRAM = """
import atexit, gc, sys
from rlvr.startup import no_collection_at_exit
if sys.argv[1] == "frozen":
    no_collection_at_exit()
if sys.argv[1] == "rlvr envs":  # the command line, run as a program (no argv passed): it asks for it
    from rlvr.cli import main
    sys.argv = ["rlvr", "envs"]
    main()

class Loud:
    def __init__(self):
        self.me = self
    def __del__(self):
        print("collected at exit", flush=True)

held = Loud()  # garbage once the interpreter clears this module at shutdown: only a collection frees it
atexit.register(lambda: print("atexit handlers run", flush=True))
"""


@pytest.mark.parametrize("mode", ["frozen", "default", "rlvr envs"])
def test_a_program_that_asks_for_it_exits_without_walking_its_heap(mode):
    p = subprocess.run([sys.executable, "-c", EXIT_PROGRAM, mode], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "atexit handlers run" in p.stdout  # the freeze runs last: every other handler still runs
    # The shutdown's collections walk no frozen object: the cycle is left to the operating system.
    assert ("collected at exit" in p.stdout) == (mode == "default")
    if mode == "rlvr envs":
        assert "rlvr/Arithmetic-v0" in p.stdout
