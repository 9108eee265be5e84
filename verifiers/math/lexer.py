"""Tokens of the LaTeX/plain answer language: one linear pass, no regex backtracking."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.verifiers.math.text import is_digit
from rlvr.verifiers.math.units import SYMBOLS as UNIT_SYMBOLS


# Not an RlvrError: a reading failure the grader turns into a verdict (`grade`); it never leaves `verify`.
class ParseError(ValueError):
    """The answer is not in the language this verifier reads."""


FUNCTIONS = {
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "arcsin",
    "arccos",
    "arctan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "log",
    "ln",
    "lg",
    "exp",
    "sqrt",
    "abs",
    "gcd",
    "lcm",
    "max",
    "min",
    "det",
}
CONSTANTS = {"pi": "pi", "infty": "oo", "inf": "oo", "infinity": "oo", "oo": "oo", "infinite": "oo"}
CONNECTORS = {"and", "or", "lor", "land", "wedge", "vee"}
# Short letter runs that are words (units, fillers), not products of single-letter variables.
SHORT_WORDS = {
    "cm",
    "mm",
    "km",
    "kg",
    "mg",
    "ft",
    "yd",
    "mi",
    "hr",
    "hrs",
    "min",
    "sec",
    "lb",
    "lbs",
    "oz",
    "mph",
    "kph",
    "ml",
    "cc",
    "sq",
    "deg",
    "rad",
    "usd",
    "mol",
    "is",
    "be",
    "are",
    "to",
    "of",
    "the",
    "in",
    "at",
    "per",
    "by",
    "its",
    "it",
    "we",
    "so",
    "as",
    "all",
    "yes",
    "no",
    "not",
    "any",
    "for",
    "has",
    "one",
    "two",
    "six",
    "ten",
    "day",
    "yr",
    "yrs",
    "kmh",
}
TEXT_COMMANDS = {"text", "textbf", "textit", "textrm", "textsf", "texttt", "mbox", "hbox", "emph", "textnormal"}
STYLE_COMMANDS = {
    "mathrm",
    "mathbf",
    "mathit",
    "mathsf",
    "mathtt",
    "boldsymbol",
    "bm",
    "mathnormal",
    "operatorname",
    "overline",
    "underline",
    "bar",
    "hat",
    "vec",
    "widehat",
    "tilde",
    "widetilde",
    "mathcal",
    "mathscr",
}
IGNORED = {"angle", "measuredangle", "triangle", "square", "displaystyle", "limits"}
GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
RELATIONS = {
    "le": "<=",
    "leq": "<=",
    "leqslant": "<=",
    "ge": ">=",
    "geq": ">=",
    "geqslant": ">=",
    "lt": "<",
    "gt": ">",
    "ne": "!=",
    "neq": "!=",
    "approx": "~",
    "equiv": "=",
    "simeq": "~",
    "cong": "=",
    "sim": "~",
}
OPERATORS = {"cdot": "*", "cdotp": "*", "times": "*", "ast": "*", "div": "/", "pm": "pm", "mp": "mp"}
SIMPLE_COMMANDS = {
    "frac",
    "sqrt",
    "binom",
    "pi",
    "infty",
    "in",
    "cup",
    "cap",
    "setminus",
    "emptyset",
    "varnothing",
    "degree",
    "langle",
    "rangle",
    "lfloor",
    "rfloor",
    "lceil",
    "rceil",
    "ldots",
    "dots",
    "cdots",
    "over",
    "choose",
    "notin",
    "to",
    "infin",
    "mathbb",
    "i",
    "e",
}
BAR = {"vert", "lvert", "rvert", "mid", "Vert"}


@dataclass(frozen=True)
class Token:
    kind: str  # num id word cmd op rel deg pct begin end amp row eof
    text: str


def _group(s: str, i: int) -> tuple[str, int]:
    """The raw content of the `{...}` at s[i] (after spaces) and the index after it."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s) or s[i] != "{":
        raise ParseError("expected '{'")
    depth, j = 0, i
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1 : j], j + 1
        j += 1
    raise ParseError("unbalanced '{'")


def _letters(run: str, in_text: bool, out: list[Token]) -> None:
    lower = run.lower()
    if in_text:  # words, except "infinity" and the connectors
        out.append(Token("cmd", CONSTANTS[lower]) if lower in CONSTANTS else Token("word", lower))
    elif run in FUNCTIONS:
        out.append(Token("cmd", run))
    elif lower in CONSTANTS:
        out.append(Token("cmd", CONSTANTS[lower]))
    elif lower in CONNECTORS or len(run) > 1 and lower in SHORT_WORDS:
        out.append(Token("word", lower))
    else:
        for prefix in _PREFIXES:  # "sinx" is sin x, "lnx" is ln x
            if run.startswith(prefix) and 0 < len(run) - len(prefix) <= 2:
                out.append(Token("cmd", prefix))
                _letters(run[len(prefix) :], in_text, out)
                return
        if len(run) >= 4:
            out.append(Token("word", lower))
        else:
            out.extend(Token("id", ch) for ch in run)


_PREFIXES = sorted(FUNCTIONS - {"abs", "max", "min", "det", "gcd", "lcm"}, key=len, reverse=True)


def tokenize(s: str, in_text: bool = False, depth: int = 0) -> list[Token]:
    """Tokens of `s`; `in_text` for the contents of `\\text{}` (letters are words there)."""
    if depth > 8:
        raise ParseError("text commands nested too deeply")
    out: list[Token] = []
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if in_text and ch == "/":
            out.append(Token("word", "per"))  # \text{km/h}: a unit per a unit (see units.read)
            i += 1
        elif ch.isspace() or in_text and not ch.isalnum() and ch != "\\":
            i += 1  # other punctuation inside \text{} is prose: "(diverges)"
        elif is_digit(ch) or ch == "." and i + 1 < n and is_digit(s[i + 1]):
            j = i
            while j < n and is_digit(s[j]):
                j += 1
            if j < n and s[j] == "." and not s.startswith("..", j):
                j += 1
                while j < n and is_digit(s[j]):
                    j += 1
            if (
                j + 1 < n
                and s[j] in "eE"
                and (is_digit(s[j + 1]) or s[j + 1] in "+-" and j + 2 < n and is_digit(s[j + 2]))
            ):
                j += 2
                while j < n and is_digit(s[j]):
                    j += 1
            out.append(Token("num", s[i:j]))
            i = j
        elif ch.isalpha() and ch.isascii():
            j = i
            while j < n and s[j].isalpha() and s[j].isascii():
                j += 1
            _letters(s[i:j], in_text, out)
            i = j
        elif ch == "\\":
            i = _command(s, i, in_text, depth, out)
        elif ch == "%":
            out.append(Token("pct", "%"))
            i += 1
        elif (
            ch in "<>!="
            and i + 1 < n
            and s[i + 1] == "="
            and not (ch == "!" and i and (s[i - 1].isalnum() or s[i - 1] in ")}"))
        ):
            # "5! = 120" is a factorial; "x != 3" is a relation
            out.append(Token("rel", {"<": "<=", ">": ">=", "!": "!=", "=": "="}[ch]))
            i += 2
        elif ch in "<>=":
            out.append(Token("rel", ch))
            i += 1
        elif ch == "*" and i + 1 < n and s[i + 1] == "*":
            out.append(Token("op", "^"))
            i += 2
        elif ch == "&":
            out.append(Token("amp", "&"))
            i += 1
        elif ch in "+-*/^_()[]{},;|!':":
            out.append(Token("op", ch))
            i += 1
        elif ch == "." and s.startswith("...", i):
            out.append(Token("op", "..."))
            i += 3
        else:
            raise ParseError(f"unexpected character {ch!r}")
    return out


def _command(s: str, i: int, in_text: bool, depth: int, out: list[Token]) -> int:
    """Tokenise the command starting at s[i] == '\\'; returns the index after it."""
    n = len(s)
    if i + 1 >= n:
        raise ParseError("dangling backslash")
    nxt = s[i + 1]
    if not nxt.isalpha():
        simple = {"\\": ("row", "\\\\"), "{": ("op", "\\{"), "}": ("op", "\\}"), "|": ("op", "|"), "%": ("pct", "%")}
        if nxt in simple:
            out.append(Token(*simple[nxt]))
        elif nxt not in ",;:! ":
            raise ParseError(f"unknown command \\{nxt}")
        return i + 2
    j = i + 1
    while j < n and s[j].isalpha():
        j += 1
    name = s[i + 1 : j]
    if name in TEXT_COMMANDS or name in STYLE_COMMANDS:
        content, j = _group(s, j)
        if content.strip() == "e":  # \text{e}, \mathrm{e}: Euler's number written upright
            out.append(Token("cmd", "e"))
            return j
        # \mathrm{m}: an upright unit symbol is the unit (`12\,\mathrm{m}`), as a longer \mathrm{} is words
        upright = name == "mathrm" and (len(content.strip()) > 1 or content.strip() in UNIT_SYMBOLS)
        text_like = name in TEXT_COMMANDS or upright
        out.extend(tokenize(content, in_text=text_like and not _is_math(content), depth=depth + 1))
        return j
    if name in IGNORED:
        return j
    if name in ("lbrace", "rbrace"):
        out.append(Token("op", "\\{" if name == "lbrace" else "\\}"))
        return j
    if name in ("begin", "end"):
        env, j = _group(s, j)
        if name == "begin" and env.strip() == "array":
            _, j = _group(s, j)  # the column spec
        out.append(Token(name, env.strip().rstrip("*")))
        return j
    if name == "mathbb":
        letter, j = _group(s, j)
        out.append(Token("cmd", "reals" if letter.strip() == "R" else "mathbb"))
        return j
    if name in FUNCTIONS or name in ("arccot", "arcsec", "arccsc", "operatorname"):
        out.append(Token("cmd", name))
    elif name in RELATIONS:
        out.append(Token("rel", RELATIONS[name]))
    elif name in OPERATORS:
        out.append(Token("op", OPERATORS[name]))
    elif name in BAR:
        out.append(Token("op", "|"))
    elif name in GREEK:
        out.append(Token("id", name))
    elif name in ("lor", "vee"):
        out.append(Token("word", "or"))
    elif name in ("land", "wedge"):
        out.append(Token("word", "and"))
    elif name == "infin":
        out.append(Token("cmd", "oo"))
    elif name == "infty":
        out.append(Token("cmd", "oo"))
    elif name == "degree":
        out.append(Token("deg", "deg"))
    elif name in SIMPLE_COMMANDS:
        out.append(Token("cmd", name))
    else:
        raise ParseError(f"unknown command \\{name}")
    return j


def _is_math(content: str) -> bool:
    """`\\text{}` holding maths (digits or operators) is read as maths, not words."""
    return any(is_digit(ch) or ch in "+=^_\\" for ch in content)
