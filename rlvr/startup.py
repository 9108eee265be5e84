"""Start-up and exit without the garbage collector's passes over the whole heap.

Importing torch, transformers and vLLM and building the models and the engine makes about 700,000
objects that live as long as the run. Python's collector walks all of them in every full
collection: a dozen as the heap grows during `rlvr train`'s start, and several more while the
interpreter shuts down (on 2 cores, 1.6 s of an 8.7 s start and 1.9 s of a 2.2 s exit:
`benchmarks/startup.py`). Paused while the heap is built, the collector makes no full pass; at
the end one collection frees the cyclic garbage and what lives is frozen (`gc.freeze`), so that
later collections skip it, as vLLM's engine does with the objects of its own start. At exit the
heap is frozen whole: the process is ending, and the operating system takes its memory back
without a walk over it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection for the block; then collect once, freeze what lives,
    and restore the collector as it was (on an error too)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        if was_enabled:
            gc.enable()


def no_collection_at_exit() -> None:
    """Freeze the heap at the very end of the program, so that the interpreter's shutdown walks
    none of it. Only for a program's own process (`rlvr` run as a command): called first, its
    handler runs after every other `atexit` handler, since they run last-registered first."""
    atexit.register(gc.freeze)
