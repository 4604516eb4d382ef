"""Lists the function builds (`frontend/containers.py`): a list of arrays appended to once per
iteration of a loop of run-time length is allocated before the loop with its trip count.

`zymo.list_of(n, like)` is `[like] * n`: `n` references to `like` (a zero-size array of the
items' dtype and ndim, which the frontend allocates), each replaced by a store `lst[i] = v`
in the loop. Fresh memory (`alloc`), no derivative of its own: its shadow is a list of zero
arrays (`_rt.zeros_list`), whose items the forward sweep replaces by the shadows of the
stored arrays, as for any store of an array into a list.
"""
from __future__ import annotations

from .registry import Rule


def list_of(n, like, /):  # positional only: the template `[like] * n` takes no keywords
    return [like] * max(int(n), 1)  # (typed on an example: never empty; the template is exact)


class list_of_(Rule, key="zymo.list_of", fn=list_of, template="[{1}] * {0}", alloc=True, nondiff=True, cases=(
        ("lst = fn(x.shape[0], x * 0.0)\nfor i in range(x.shape[0]):\n    lst[i] = x * x[i]\n"
         + "return lst[1] * lst[0] + lst[2]", ((3,),)),
        ("lst = fn(x.shape[0], x[0] * 0.0)\nfor i in range(x.shape[0]):\n    lst[i] = np.sin(x[i])\n"
         + "return lst[2][0] * lst[0][1]", ((3, 2),)))):
    pass
