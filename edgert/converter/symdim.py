"""Symbolic dimensions: integer expressions over the bounded input symbols.

An Expr is a canonical sum of terms, each an integer coefficient times a product of
atoms; an atom is a symbol or a compound that is not a polynomial: floor division,
floor modulo, min and max (of Exprs). Ceiling division is floor((a + b - 1) / b) for a
constant b > 0 (and -floor(-a / b) otherwise). Construction simplifies, so that equal
expressions of the usual shapes compare equal:

* polynomials are collected (H + H = 2*H, (H + 1) * 2 - 2 = 2*H);
* floor(a / c) for a constant c > 0 moves the terms of a divisible by c out (floor((2*H
  + 64) / 32) = 2 + floor(2*H / 32) = 2 + floor(H / 16)), keeps the constant within
  0..c-1, divides by the coefficients' common factor, and merges nested divisions
  (floor(floor(H / 2) / 2) = floor(H / 4));
* a mod c drops the terms divisible by c; min and max flatten, drop duplicates, merge
  constants and resolve arguments that differ by a constant (min(T, T + 3) = T).

Expr values act like ints in arithmetic (+, -, *, //, %, unary -, with ints on either
side); evaluate() gives the value for symbol values, interval() bounds it over a box of
symbol bounds, encode() writes the program the C runtime evaluates (docs/format.md,
"Expression programs"), and str() reads as the dims are usually written: `ceil(H/32)`,
`T - 3`, `min(T, 64)`.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

# ---- expression programs (docs/format.md): one u32 word per instruction, opcode in
# bits 0-7 and a signed 24-bit argument in bits 8-31; OP_CONST32 takes its value from
# the next word.
OP_CONST, OP_SYM, OP_ADD, OP_SUB, OP_MUL, OP_FLOORDIV, OP_MOD, OP_MIN, OP_MAX, OP_NEG, OP_CONST32, OP_DIM = range(12)
MAX_PROGRAM = 256  # words per program (the runtime refuses longer ones)
MAX_STACK = 16  # values on the evaluation stack (likewise)

_ATOM_SYM, _ATOM_DIV, _ATOM_MOD, _ATOM_MIN, _ATOM_MAX, _ATOM_DIM = range(6)


class Undecided(Exception):
    """A comparison of expressions that holds for some symbol values and not others."""


class Expr:
    """An integer expression; immutable and hashable. Build with sym(), const() or
    arithmetic on them."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: dict):
        # terms: {monomial (a sorted tuple of atoms, repeated for powers): coefficient}
        self.terms = tuple(sorted(((m, c) for m, c in terms.items() if c != 0), key=lambda mc: _mono_key(mc[0])))
        self._hash = hash(self.terms)

    # ---- identity -----------------------------------------------------------------
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if isinstance(other, int):
            return self.is_const and self.value == other
        return isinstance(other, Expr) and self.terms == other.terms

    def __ne__(self, other) -> bool:
        return not self == other

    @property
    def is_const(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def value(self) -> int:
        """The constant's value (ValueError when the expression has symbols)."""
        if not self.is_const:
            raise ValueError(f"{self} is not a constant")
        return self.terms[0][1] if self.terms else 0

    def symbols(self) -> set[int]:
        """The indices of the symbols the expression reads."""
        out: set[int] = set()
        for m, _ in self.terms:
            for a in m:
                out |= _atom_symbols(a)
        return out

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __bool__(self) -> bool:
        if self.is_const:
            return self.value != 0
        raise Undecided(f"the truth of {self} depends on the input size")

    # ---- arithmetic ---------------------------------------------------------------
    def __add__(self, other):
        other = as_expr(other)
        terms = dict(self.terms)
        for m, c in other.terms:
            terms[m] = terms.get(m, 0) + c
        return Expr(terms)

    __radd__ = __add__

    def __neg__(self):
        return Expr({m: -c for m, c in self.terms})

    def __pos__(self):
        return self

    def __sub__(self, other):
        return self + (-as_expr(other))

    def __rsub__(self, other):
        return as_expr(other) - self

    def __mul__(self, other):
        other = as_expr(other)
        terms: dict = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2, key=_atom_key))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Expr(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return floordiv(self, other)

    def __rfloordiv__(self, other):
        return floordiv(other, self)

    def __mod__(self, other):
        return mod(self, other)

    def __rmod__(self, other):
        return mod(other, self)

    # Comparisons decide only what holds whatever the symbols are (Undecided otherwise);
    # decide() takes the symbols' bounds into account.
    def __lt__(self, other):
        return bool(as_expr(other) - self > 0)

    def __gt__(self, other):
        d = self - as_expr(other)
        if d.is_const:
            return d.value > 0
        raise Undecided(f"whether {self} > {other} depends on the input size")

    def __le__(self, other):
        return not self > other

    def __ge__(self, other):
        return not as_expr(other) > self

    # ---- meaning ------------------------------------------------------------------
    def evaluate(self, values: Mapping[int, int] | Sequence[int]) -> int:
        """The value for symbol values (by symbol index); ZeroDivisionError on a division by 0."""
        total = 0
        for m, c in self.terms:
            p = c
            for a in m:
                p *= _atom_value(a, values)
            total += p
        return total

    def interval(self, box: Sequence[tuple[int, int]]) -> tuple[float, float]:
        """Bounds (lo, hi) of the value over symbol values within box[k] = (lo_k, hi_k)
        (conservative: the true range lies within)."""
        lo = hi = 0.0
        for m, c in self.terms:
            a_lo, a_hi = float(c), float(c)
            for a in m:
                b_lo, b_hi = _atom_interval(a, box)
                cands = (a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi)
                a_lo, a_hi = min(cands), max(cands)
            lo, hi = lo + a_lo, hi + a_hi
        return lo, hi

    def encode(self) -> list[int]:
        """The program (u32 words) that computes the expression (docs/format.md)."""
        out: list[int] = []
        if not self.terms:
            _emit_const(out, 0)
            return out
        first = True
        for m, c in self.terms:
            if not m:
                _emit_const(out, abs(c) if not first else c)
            else:
                for k, a in enumerate(m):
                    _encode_atom(a, out)
                    if k:
                        out.append(OP_MUL)
                if abs(c) != 1 or (first and c < 0):
                    _emit_const(out, c if first else abs(c))
                    out.append(OP_MUL)
            if not first:
                out.append(OP_ADD if c > 0 else OP_SUB)
            first = False
        return out

    def __repr__(self) -> str:
        return f"Expr({self})"

    def __str__(self) -> str:
        return render(self, None)


# ---- construction -----------------------------------------------------------------------

def const(v: int) -> Expr:
    v = int(v)
    return Expr({(): v}) if v else Expr({})


def sym(index: int, name: str = "") -> Expr:
    """Symbol `index` (its position in the file's BOUNDS symbols); `name` is for display."""
    return Expr({((_ATOM_SYM, int(index), name),): 1})


def dim_ref(input_index: int, dim: int) -> Expr:
    """Dim `dim` of input `input_index` of the node a rule belongs to, at run time (for
    the semantics of an op over its own input, such as an equal split); evaluate() reads
    it from values[("in", input_index, dim)]."""
    return Expr({((_ATOM_DIM, int(input_index), int(dim)),): 1})


def substitute(e: Expr, dims) -> Expr:
    """e with each input-dim reference dim_ref(i, d) replaced by dims(i, d) (an Expr)."""
    def atom(a) -> Expr:
        if a[0] == _ATOM_SYM:
            return _atom_expr(a)
        if a[0] == _ATOM_DIM:
            return as_expr(dims(a[1], a[2]))
        if a[0] == _ATOM_DIV:
            return floordiv(substitute(a[1], dims), substitute(a[2], dims))
        if a[0] == _ATOM_MOD:
            return mod(substitute(a[1], dims), substitute(a[2], dims))
        return _minmax(a[0], [substitute(x, dims) for x in a[1]])

    total = const(0)
    for m, c in as_expr(e).terms:
        p = const(c)
        for a in m:
            p = p * atom(a)
        total = total + p
    return total


def as_expr(v) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return const(int(v))
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise TypeError(f"not an integer expression: {v!r}") from None
    if iv != v:
        raise TypeError(f"not an integer: {v!r}")
    return const(iv)


def _content(e: Expr) -> int:
    g = 0
    for _, c in e.terms:
        g = math.gcd(g, c)
    return g


def floordiv(a, b) -> Expr:
    """floor(a / b); ZeroDivisionError for a constant b = 0."""
    a, b = as_expr(a), as_expr(b)
    if b.is_const:
        c = b.value
        if c == 0:
            raise ZeroDivisionError("division of an expression by zero")
        if c < 0:
            a, c = -a, -c
        if c == 1:
            return a
        if a.is_const:
            return const(a.value // c)
        # Terms divisible by c leave the division; the constant is kept within 0..c-1.
        out, rest = {}, {}
        for m, k in a.terms:
            if m and k % c == 0:
                out[m] = k // c
            elif not m:
                out[()] = k // c
                if k % c:
                    rest[()] = k % c
            else:
                rest[m] = k
        q = Expr(out)
        r = Expr(rest)
        if r.is_const:
            return q + (r.value // c)
        g = math.gcd(_content(r), c)
        if g > 1:
            r = Expr({m: k // g for m, k in r.terms})
            c //= g
            if c == 1:
                return q + r
        # floor((floor(y / p) + k) / c) = floor((y + k * p) / (p * c)) for p, c > 0: nested
        # floors and ceilings merge (ceil(ceil(H/2)/2) = ceil(H/4))
        var = [(m, k) for m, k in r.terms if m]
        k0 = r.terms[-1][1] if r.terms and not r.terms[-1][0] else 0
        if len(var) == 1 and var[0][1] == 1 and len(var[0][0]) == 1:
            atom = var[0][0][0]
            if atom[0] == _ATOM_DIV and atom[2].is_const and atom[2].value > 0:
                p = atom[2].value
                return q + floordiv(atom[1] + k0 * p, p * c)
        return q + _atom_expr((_ATOM_DIV, r, const(c)))
    if a == b:
        return const(1)
    q = _exact_quotient(a, b)
    if q is not None:
        return q
    return _atom_expr((_ATOM_DIV, a, b))


def _exact_quotient(a: Expr, b: Expr) -> Expr | None:
    """a / b when b is one term (c * M) that divides every term of a exactly, else None."""
    if len(b.terms) != 1:
        return None
    mb, cb = b.terms[0]
    out = {}
    for m, k in a.terms:
        rest = list(m)
        for atom in mb:
            if atom not in rest:
                return None
            rest.remove(atom)
        if k % cb:
            return None
        out[tuple(rest)] = out.get(tuple(rest), 0) + k // cb
    return Expr(out)


def ceildiv(a, b) -> Expr:
    """ceil(a / b)."""
    a, b = as_expr(a), as_expr(b)
    if b.is_const and b.value > 0:
        return floordiv(a + (b.value - 1), b)
    return -floordiv(-a, b)


def mod(a, b) -> Expr:
    """a mod b with the sign of b (Python's %, ONNX Mod with fmod=0)."""
    a, b = as_expr(a), as_expr(b)
    if b.is_const:
        c = b.value
        if c == 0:
            raise ZeroDivisionError("modulo of an expression by zero")
        if abs(c) == 1:
            return const(0)
        if a.is_const:
            return const(a.value % c)
        # (k * (x mod d)) mod c = (k * x) mod c when c divides d
        inner = const(0)
        for m, k in a.terms:
            if len(m) == 1 and m[0][0] == _ATOM_MOD and m[0][2].is_const and m[0][2].value % c == 0:
                inner = inner + k * m[0][1]
            else:
                inner = inner + Expr({m: k})
        r = Expr({m: k % c for m, k in inner.terms if k % c})
        if r.is_const:
            return const(r.value % c)
        return _atom_expr((_ATOM_MOD, r, const(c)))
    if a == b:
        return const(0)
    return _atom_expr((_ATOM_MOD, a, b))


def _minmax(kind: int, args: Iterable) -> Expr:
    flat: list[Expr] = []
    for x in args:
        x = as_expr(x)
        atom = _single_atom(x)
        if atom is not None and atom[0] == kind:
            flat.extend(atom[1])
        else:
            flat.append(x)
    pick = min if kind == _ATOM_MIN else max
    consts = [x.value for x in flat if x.is_const]
    rest: list[Expr] = []
    for x in flat:
        if x.is_const:
            continue
        # arguments differing by a constant: keep the smaller (min) or larger (max)
        for k, y in enumerate(rest):
            d = x - y
            if d.is_const:
                if pick(d.value, 0) != 0:
                    rest[k] = x
                break
        else:
            rest.append(x)
    if consts:
        if not rest:
            return const(pick(consts))
        rest.append(const(pick(consts)))
    uniq = sorted(set(rest), key=_expr_key)
    if len(uniq) == 1:
        return uniq[0]
    return _atom_expr((kind, tuple(uniq)))


def min_(*args) -> Expr:
    return _minmax(_ATOM_MIN, args[0] if len(args) == 1 and not isinstance(args[0], (int, Expr)) else args)


def max_(*args) -> Expr:
    return _minmax(_ATOM_MAX, args[0] if len(args) == 1 and not isinstance(args[0], (int, Expr)) else args)


def clamp(x, lo, hi) -> Expr:
    return min_(max_(x, lo), hi)


def _atom_expr(atom) -> Expr:
    return Expr({(atom,): 1})


def _single_atom(e: Expr):
    if len(e.terms) == 1 and e.terms[0][1] == 1 and len(e.terms[0][0]) == 1:
        return e.terms[0][0][0]
    return None


# ---- ordering (canonical forms sort terms and atoms by these keys) ----------------------

def _atom_key(a) -> tuple:
    if a[0] == _ATOM_SYM:
        return (0, a[1], a[2])
    if a[0] == _ATOM_DIM:
        return (5, a[1], a[2])
    if a[0] in (_ATOM_DIV, _ATOM_MOD):
        return (a[0], _expr_key(a[1]), _expr_key(a[2]))
    return (a[0], tuple(_expr_key(x) for x in a[1]))


def _mono_key(m: tuple) -> tuple:
    return (len(m) == 0, tuple(_atom_key(a) for a in m))


def _expr_key(e: Expr) -> tuple:
    return tuple((_mono_key(m), c) for m, c in e.terms)


def _atom_symbols(a) -> set[int]:
    if a[0] == _ATOM_SYM:
        return {a[1]}
    if a[0] == _ATOM_DIM:
        return set()
    if a[0] in (_ATOM_DIV, _ATOM_MOD):
        return a[1].symbols() | a[2].symbols()
    out: set[int] = set()
    for x in a[1]:
        out |= x.symbols()
    return out


def _atom_value(a, values) -> int:
    if a[0] == _ATOM_SYM:
        return int(values[a[1]])
    if a[0] == _ATOM_DIM:
        return int(values[("in", a[1], a[2])])
    if a[0] == _ATOM_DIV:
        return a[1].evaluate(values) // a[2].evaluate(values)
    if a[0] == _ATOM_MOD:
        return a[1].evaluate(values) % a[2].evaluate(values)
    vals = [x.evaluate(values) for x in a[1]]
    return min(vals) if a[0] == _ATOM_MIN else max(vals)


def _atom_interval(a, box) -> tuple[float, float]:
    if a[0] == _ATOM_DIM:
        return 0.0, float(2**31 - 1)
    if a[0] == _ATOM_SYM:
        lo, hi = box[a[1]]
        return float(lo), float(hi)
    if a[0] in (_ATOM_DIV, _ATOM_MOD):
        n_lo, n_hi = a[1].interval(box)
        d_lo, d_hi = a[2].interval(box)
        if a[0] == _ATOM_MOD:
            if d_lo > 0:
                return 0.0, d_hi - 1
            if d_hi < 0:
                return d_lo + 1, 0.0
            return -math.inf, math.inf
        if d_lo > 0:
            cands = [n_lo / d_lo, n_lo / d_hi, n_hi / d_lo, n_hi / d_hi]
            return math.floor(min(cands)), math.floor(max(cands))
        if d_hi < 0:
            cands = [n_lo / d_lo, n_lo / d_hi, n_hi / d_lo, n_hi / d_hi]
            return math.floor(min(cands)), math.floor(max(cands))
        return -math.inf, math.inf
    ivs = [x.interval(box) for x in a[1]]
    if a[0] == _ATOM_MIN:
        return min(i[0] for i in ivs), min(i[1] for i in ivs)
    return max(i[0] for i in ivs), max(i[1] for i in ivs)


def decide(e: Expr, box: Sequence[tuple[int, int]]) -> int | None:
    """The sign of e (-1, 0 or 1) when it is the same for every symbol value within box,
    else None."""
    lo, hi = e.interval(box)
    if lo > 0:
        return 1
    if hi < 0:
        return -1
    if lo == hi == 0:
        return 0
    return None


def simplify(e: Expr, box: Sequence[tuple[int, int]]) -> Expr:
    """e with the min, max and mod atoms that the box decides resolved (min(T, 512) = T
    when T <= 512 throughout)."""
    def atom(a):
        if a[0] in (_ATOM_SYM, _ATOM_DIM):
            return _atom_expr(a)
        if a[0] in (_ATOM_DIV, _ATOM_MOD):
            n, d = simplify(a[1], box), simplify(a[2], box)
            if a[0] == _ATOM_MOD and d.is_const and d.value > 0:
                lo, hi = n.interval(box)
                if 0 <= lo and hi < d.value:
                    return n
            return floordiv(n, d) if a[0] == _ATOM_DIV else mod(n, d)
        args = [simplify(x, box) for x in a[1]]
        keep = []
        for k, x in enumerate(args):
            # x is dropped when another argument is at least as small (min) or large (max)
            dominated = False
            for j, y in enumerate(args):
                if j == k:
                    continue
                s = decide(y - x, box)
                if s is not None and ((a[0] == _ATOM_MIN and s <= 0) or (a[0] == _ATOM_MAX and s >= 0)):
                    if s != 0 or j < k:
                        dominated = True
                        break
            if not dominated:
                keep.append(x)
        return _minmax(a[0], keep)

    total = const(0)
    for m, c in e.terms:
        p = const(c)
        for a in m:
            p = p * atom(a)
        total = total + p
    return total


def equal_over(a, b, box: Sequence[tuple[int, int]], points: int = 4096) -> bool:
    """a == b for every symbol value within box: canonical forms first, then the values
    at every point of the box (up to `points` points, else the corners and an even
    spread along each symbol)."""
    a, b = as_expr(a), as_expr(b)
    if a == b or simplify(a, box) == simplify(b, box):
        return True
    d = a - b
    syms = sorted(d.symbols())
    if not syms:
        return d.value == 0
    size = math.prod(box[k][1] - box[k][0] + 1 for k in syms)
    vals = [hi for _, hi in box]
    if size <= points:
        import itertools
        for combo in itertools.product(*[range(box[k][0], box[k][1] + 1) for k in syms]):
            for k, v in zip(syms, combo):
                vals[k] = v
            if d.evaluate(vals) != 0:
                return False
        return True
    for k in syms:
        lo, hi = box[k]
        step = max(1, (hi - lo + 1) // points)
        for v in list(range(lo, hi + 1, step)) + [hi]:
            vals2 = list(vals)
            vals2[k] = v
            if d.evaluate(vals2) != 0:
                return False
    return True


# ---- programs ---------------------------------------------------------------------------

def _emit_const(out: list[int], v: int) -> None:
    if -(1 << 23) <= v < (1 << 23):
        out.append(OP_CONST | (v & 0xFFFFFF) << 8)
    elif -(1 << 31) <= v < (1 << 31):
        out += [OP_CONST32, v & 0xFFFFFFFF]
    else:
        raise OverflowError(f"the constant {v} does not fit an expression program")


def _encode_atom(a, out: list[int]) -> None:
    if a[0] == _ATOM_SYM:
        if not 0 <= a[1] < (1 << 23):
            raise OverflowError(f"symbol {a[1]} out of range")
        out.append(OP_SYM | a[1] << 8)
    elif a[0] == _ATOM_DIM:
        if not (0 <= a[1] < (1 << 20) and 0 <= a[2] < 8):
            raise OverflowError(f"input dim {a[1]}, {a[2]} out of range")
        out.append(OP_DIM | (a[1] * 8 + a[2]) << 8)
    elif a[0] in (_ATOM_DIV, _ATOM_MOD):
        out += a[1].encode() + a[2].encode()
        out.append(OP_FLOORDIV if a[0] == _ATOM_DIV else OP_MOD)
    else:
        op = OP_MIN if a[0] == _ATOM_MIN else OP_MAX
        for k, x in enumerate(a[1]):
            out += x.encode()
            if k:
                out.append(op)


def program(e: Expr) -> list[int]:
    """e's program, checked against the runtime's limits (MAX_PROGRAM words, MAX_STACK
    values); OverflowError when it does not fit."""
    words = e.encode()
    if len(words) > MAX_PROGRAM or stack_depth(words) > MAX_STACK:
        raise OverflowError(f"the expression {e} is too long for the runtime ({len(words)} words)")
    return words


def stack_depth(words: Sequence[int]) -> int:
    """The largest stack depth a program reaches (ValueError when it is not well formed)."""
    depth = top = 0
    k = 0
    while k < len(words):
        op = words[k] & 0xFF
        if op in (OP_CONST, OP_SYM, OP_DIM):
            depth += 1
        elif op == OP_CONST32:
            depth += 1
            k += 1
            if k >= len(words):
                raise ValueError("OP_CONST32 without its value")
        elif op == OP_NEG:
            if depth < 1:
                raise ValueError("stack underflow")
        elif OP_ADD <= op <= OP_MAX:
            if depth < 2:
                raise ValueError("stack underflow")
            depth -= 1
        else:
            raise ValueError(f"unknown opcode {op}")
        top = max(top, depth)
        k += 1
    if depth != 1:
        raise ValueError(f"the program leaves {depth} values")
    return top


def _interpret(words: Sequence[int], leaf, binary) -> Any:
    """Runs a program: leaf(op, arg) gives the value a CONST, CONST32 (op OP_CONST), SYM or
    DIM word pushes, binary[op](a, b) combines the two top values; NEG negates the top."""
    stack: list = []
    k = 0
    while k < len(words):
        w = words[k]
        op = w & 0xFF
        arg = w >> 8
        if arg >= 1 << 23:
            arg -= 1 << 24
        if op == OP_CONST32:
            k += 1
            v = words[k] & 0xFFFFFFFF
            stack.append(leaf(OP_CONST, v - (1 << 32) if v >= 1 << 31 else v))
        elif op in (OP_CONST, OP_SYM, OP_DIM):
            stack.append(leaf(op, arg))
        elif op == OP_NEG:
            stack.append(-stack.pop())
        else:
            b, a = stack.pop(), stack.pop()
            stack.append(binary[op](a, b))
        k += 1
    return stack[-1]


def run_program(words: Sequence[int], values) -> int:
    """What the runtime computes for a program (the reference for its tests): floor
    division and modulo, ZeroDivisionError on a division by zero. values: symbol index ->
    value, and ("in", input, dim) -> the node's input dim."""
    def leaf(op: int, arg: int) -> int:
        if op == OP_CONST:
            return arg
        return int(values[arg] if op == OP_SYM else values[("in", arg >> 3, arg & 7)])

    return _interpret(words, leaf, {OP_ADD: lambda a, b: a + b, OP_SUB: lambda a, b: a - b,
                                    OP_MUL: lambda a, b: a * b, OP_FLOORDIV: lambda a, b: a // b,
                                    OP_MOD: lambda a, b: a % b, OP_MIN: min, OP_MAX: max})


def decode(words: Sequence[int], names: Sequence[str] = ()) -> Expr:
    """The expression a program computes (for inspect and tests)."""
    def leaf(op: int, arg: int) -> Expr:
        if op == OP_CONST:
            return const(arg)
        if op == OP_SYM:
            return sym(arg, names[arg] if arg < len(names) else f"s{arg}")
        return dim_ref(arg >> 3, arg & 7)

    return _interpret(words, leaf, {OP_ADD: lambda a, b: a + b, OP_SUB: lambda a, b: a - b,
                                    OP_MUL: lambda a, b: a * b, OP_FLOORDIV: floordiv, OP_MOD: mod,
                                    OP_MIN: min_, OP_MAX: max_})


# ---- text -------------------------------------------------------------------------------

def render(e: Expr, names: Sequence[str] | None = None) -> str:
    """Reads as dims are written: `2*H + 1`, `ceil(W/32)`, `floor(T/2)`, `T % 8`,
    `min(T, 64)`; names: symbol names by index (default: the names the symbols carry)."""
    if not e.terms:
        return "0"
    parts: list[tuple[int, str]] = []
    for m, c in e.terms:
        if not m:
            parts.append((c, str(abs(c))))
            continue
        body = "*".join(_render_atom(a, names) for a in m)
        parts.append((c, body if abs(c) == 1 else f"{abs(c)}*{body}"))
    if len(parts) > 1 and parts[0][0] < 0 and parts[-1][0] > 0 and not e.terms[-1][0]:
        parts.insert(0, parts.pop())  # 64 - T, not -T + 64
    out = ""
    for k, (c, text) in enumerate(parts):
        if k == 0:
            out = ("-" if c < 0 else "") + text
        else:
            out += (" - " if c < 0 else " + ") + text
    return out


def _paren(e: Expr, names) -> str:
    text = render(e, names)
    return text if len(e.terms) <= 1 and not text.startswith("-") else f"({text})"


def _render_atom(a, names) -> str:
    if a[0] == _ATOM_DIM:
        return f"in{a[1]}.shape[{a[2]}]"
    if a[0] == _ATOM_SYM:
        if names is not None and a[1] < len(names):
            return names[a[1]]
        return a[2] or f"s{a[1]}"
    if a[0] == _ATOM_DIV:
        n, d = a[1], a[2]
        if d.is_const and d.value > 1:
            c = d.value
            k = n.terms[-1][1] if n.terms and not n.terms[-1][0] else 0
            if k == c - 1:  # floor((x + c - 1) / c) = ceil(x / c)
                return f"ceil({_paren(n - k, names)}/{c})"
            return f"floor({_paren(n, names)}/{c})"
        return f"floor({_paren(n, names)}/{_paren(d, names)})"
    if a[0] == _ATOM_MOD:
        return f"({_paren(a[1], names)} % {_paren(a[2], names)})"
    name = "min" if a[0] == _ATOM_MIN else "max"
    return f"{name}({', '.join(render(x, names) for x in a[1])})"
