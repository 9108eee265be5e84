"""`RlvrError`: the root of every error rlvr raises on purpose, so that a caller catches them all
with one clause (`except RlvrError`) and the CLI turns each into one line. It sits at the top of the
namespace with no imports, so that every package (rlvr.sandbox, the lowest, included) may import it
without importing another package; each package derives its own bases from it."""


class RlvrError(Exception):
    """Base class of every error rlvr raises on purpose (bad input, a missing component)."""
