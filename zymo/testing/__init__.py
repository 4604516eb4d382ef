"""Checkers for zymo's derivatives: finite differences, forward/reverse agreement, rules.

Contract:

- `check_grad(f, *args, modes=("forward", "reverse"), rtol=None, atol=None, const=(), ...)`
  differentiates `f` at `args` with zymo and checks it: the one finite-difference
  checker of the project (its own tests use it too). The derivative checked is that
  of the map F: initial values of the differentiated arguments -> (f's result, final
  values of the differentiated arguments passed by reference), so in-place outputs
  are checked like results. Arguments holding floats (Python or NumPy floats, float
  arrays, and tuples and lists of them) are differentiated (`wrt=` narrows that
  down, `const=` leaves some out); every other argument is passed as `Const`.
  Arrays, lists and tuples holding arrays are passed by reference (`Duplicated`);
  floats and tuples of floats are `Active`. f's result counts when it holds floats
  (a float, a float array, or a tuple of them: a tuple is checked in forward mode
  only); a function returning nothing else must write to an argument. For each
  differentiated argument `k` and random directions `u` (entries in [-1, 1]),
  `FD(J u)` is the central difference of F itself, evaluated in float64 at steps h,
  h/2 and h/4 and Richardson-extrapolated (h = eps * max(1, max |x_k|)); then
  * forward mode: zymo's tangent `J u` (of the result and of the final values)
    equals `FD(J u)` (argument by argument, then all arguments seeded together);
  * reverse mode: `<J^T w, u>` equals `<w, FD(J u)>`, with `w` a random cotangent
    of F: `1` for a float result; for an array result, random, and zymo
    differentiates `np.sum(f(*args) * v)`, a wrapper this module writes; for the
    final values random (or `cotangents=`), passed as the arguments' shadows, so
    the check also tests that adjoints are *added* to them;
  * with both modes, the dot-product test `<u, J^T w> == <J u, w>`, to rounding;
  * the primal values zymo returns equal `f(*args)`, and a forward tangent has
    the result's dtype.
  A mismatch raises `AssertionError` naming the function, the argument, the
  check, and zymo's and the reference value; `FiniteDifferenceError` (an
  AssertionError) when finite differences disagree with zymo but do not
  converge at that point themselves (no verdict). It returns a `GradCheck` with
  what it computed (every call of `f` gets copies of the arguments). `f` must
  be a Python function whose source zymo can read (a `def` in a file, a
  closure, a lambda alone on its line).

- `check_rule(key, modes=..., dtypes=("float64", "float32"))` tests the
  registered rule `key`: `rule_cases(key)` builds small test functions (real
  `def`s: closures that call the primitive object captured from their closure,
  which zymo resolves through the registry) and inputs from the cases the rule
  declares (`Rule.cases`: expressions and named `Form`s) and the automatic ones its
  flags call for, and each case runs `check_grad` in the given modes: scalars for
  `math.*`, operators and
  builtins (operators also on arrays); scalar, vector, matrix, 0-d and
  broadcasting shapes, mixed dtypes, an argument passed twice, a loop, `out=`
  and in-place forms for elementwise NumPy rules, in float64 and float32;
  several axes and keepdims for reductions; 1-d, 2-d, 0-d and batched shapes
  for products; derivatives through a view and through writes into it for view
  rules; fresh memory read and partly or wholly overwritten for `alloc` rules.
  A `nondiff` rule is checked twice: a function depending on the inputs only
  through the primitive must have a derivative of exactly zero in every mode,
  and one that uses the result as a constant factor must match finite
  differences. Every case also checks that the IR verifies and that the
  primitive appears in it (`RuleCase.keys`). `check_rule` raises one
  `AssertionError` listing every failing case and returns the cases it ran. A
  key it has no cases for raises `KeyError`: no rule is skipped silently.

- `check_custom_rule(f, *args)` checks a `zymo.custom_rule` as built-in rules are
  checked (`check_grad` of a function calling it).

- Inputs are drawn from `DOMAINS` (primitive name -> one `Domain` per
  argument): log and sqrt positive, arcsin in (-1, 1), division by values away
  from zero, floor and round away from their jumps, max/min of distinct
  elements, comparisons and min/max of separated pairs (`SEPARATED`), so finite
  differences are meaningful.

Tolerances (`TOLERANCES`, by the lowest precision among the differentiated
arguments): against finite differences float64 rtol=1e-6, atol=1e-9 and
float32 rtol=1e-3, atol=1e-5, relative to the largest magnitude compared;
forward against reverse 1e-10 (float64) and 1e-4 (float32), relative to the
size of the terms of the dot products; primal results 1e-10 and 1e-5.

Modules: `support.py` (tolerances, values, comparison), `grad.py` (`check_grad`),
`domains.py` (where inputs are drawn), `forms.py` (the named test functions),
`cases.py` (`rule_cases`, `check_rule`, `check_custom_rule`).
"""
from __future__ import annotations

from .cases import RuleCase, check_custom_rule, check_rule, expected_keys, prim_keys, rule_cases
from .domains import DOMAINS, SEPARATED, ZERO_D, Domain, draw_inputs
from .forms import FORMS, expr_factory, keyword_form
from .grad import FiniteDifferenceError, GradCheck, check_grad
from .support import TOLERANCES

__all__ = [
    "DOMAINS", "Domain", "FORMS", "FiniteDifferenceError", "GradCheck", "RuleCase", "SEPARATED", "TOLERANCES",
    "ZERO_D", "check_custom_rule", "check_grad", "check_rule", "draw_inputs", "expected_keys", "expr_factory",
    "keyword_form", "prim_keys", "rule_cases",
]
