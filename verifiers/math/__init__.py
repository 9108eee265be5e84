"""Math answer verification: `verify(response, gold) -> Verdict`.

The final answer is extracted from the response (`\\boxed{}`, "the answer is", `<answer>` tags,
the last number), parsed by a small LaTeX/plain parser into SymPy, and compared with the gold
exactly; sets order-free, tuples in order, intervals by endpoints, matrices cell by cell.
Numeric policy (no tolerance; see `verifiers.math.decimals`): two decimals are equal only as
decimals (3.140 = 3.14, 3.141 != 3.14); a decimal equals an exact gold without a finite decimal
expansion (1/3, sqrt 17, 2 pi) when every digit it shows is right, rounded or truncated, and it
shows at least 4 significant digits; the same element by element inside tuples, sets,
intervals and matrices. Every call is bounded in time (worker processes with a deadline).
See `MathOptions` for the policy choices and their defaults.
"""

from rlvr.verifiers.math.api import VERSION, shutdown, verify, warm_up
from rlvr.verifiers.math.options import MathOptions, VerifierTypeError

__all__ = ["VERSION", "MathOptions", "VerifierTypeError", "shutdown", "verify", "warm_up"]
