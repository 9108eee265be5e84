"""`python -m rlvr`. Python put the current folder first on `sys.path`; it goes last here, before
anything else is imported, so that a `json.py` there cannot shadow the standard library's
(`rlvr.cli.add_cwd_to_path`)."""

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
    sys.path.append(sys.path.pop(0))

from rlvr.cli import main  # noqa: E402 - after the path is set

raise SystemExit(main())
