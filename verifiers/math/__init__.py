"""Math answer verification: `verify(response, gold) -> Verdict`.

The final answer is extracted from the response (`\\boxed{}`, "the answer is", `<answer>` tags,
the last number), parsed by a small LaTeX/plain parser into SymPy, and compared with the gold:
exactly for exact golds, with tolerance for decimal golds; sets order-free, tuples in order,
intervals by endpoints. Every call is bounded in time (worker processes with a deadline).
See `MathOptions` for the policy choices and their defaults.
"""
from verifiers.math.api import VERSION, shutdown, verify, warm_up
from verifiers.math.options import MathOptions, VerifierTypeError

__all__ = ["VERSION", "MathOptions", "VerifierTypeError", "shutdown", "verify", "warm_up"]
