"""Binding a call's arguments to a function's parameters, as Python does.

Contract: `bind(args, name, pos, kw, defaults, kw_defaults, error)` takes the `ast.arguments`
of a function being inlined (or differentiated), the call's positional bindings `pos` and
keyword bindings `kw` (already expanded from `*tuple` and `**dict`), the bindings of the
positional defaults (the last `len(defaults)` of the positional parameters) and of the
keyword-only defaults (`kw_defaults`, by name), and returns `{parameter name: binding}`:

- positional-only and ordinary parameters take the positional arguments in order, then
  keywords by name (positional-only ones never by keyword), then their defaults;
- `*args` is bound to the tuple of the positional arguments left over (tuples are virtual
  bindings, so `len(args)`, `args[0]` and `for a in args` are resolved at lowering time);
- keyword-only parameters take keywords, then their defaults;
- `**kwargs` is bound to a dict of the keywords left over: `make_dict(items)` builds it (a dict
  built in the function, `frontend/containers.py`, with its methods), else a dict record.

It raises `error(message)` (a `ZymoSourceError` at the call's line) for what Python would
raise a `TypeError` for: too many positional arguments, a missing one, a repeated or
unexpected keyword.

`expand(pos_nodes, kw_nodes, ...)` is the call side: it turns `f(a, *t, k=v, **d)` into flat
`pos`/`kw` where `t` is a tuple binding and `d` a dict record or a compile-time dict."""
from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from .objects import Obj


def bind(args: ast.arguments, name: str, pos: list, kw: dict, defaults: list, kw_defaults: dict,
         error: Callable[[str], Exception], make_dict: Callable[[dict], Any] | None = None) -> dict[str, Any]:
    positional = [a.arg for a in args.posonlyargs] + [a.arg for a in args.args]
    n_posonly = len(args.posonlyargs)
    bound: dict[str, Any] = dict(zip(positional, pos))
    extra_pos = tuple(pos[len(positional):])
    if extra_pos and args.vararg is None:
        raise error(f"{name}() takes {len(positional)} positional arguments but {len(pos)} were given")
    kwonly = [a.arg for a in args.kwonlyargs]
    extra_kw: dict[str, Any] = {}
    for k, v in kw.items():
        if k in positional[n_posonly:] or k in kwonly:
            if k in bound:
                raise error(f"{name}() got multiple values for argument {k!r}")
            bound[k] = v
        elif args.kwarg is not None:
            extra_kw[k] = v
        else:
            raise error(f"{name}() got an unexpected keyword argument {k!r}")
    first_default = len(positional) - len(defaults)
    for i, p in enumerate(positional):
        if p not in bound:
            if i < first_default:
                raise error(f"{name}() missing required argument {p!r}")
            bound[p] = defaults[i - first_default]
    for p in kwonly:
        if p not in bound:
            if p not in kw_defaults:
                raise error(f"{name}() missing required keyword-only argument {p!r}")
            bound[p] = kw_defaults[p]
    if args.vararg is not None:
        bound[args.vararg.arg] = extra_pos
    if args.kwarg is not None:  # a dict built in the function (`frontend/containers.py`): get, items, ...
        bound[args.kwarg.arg] = make_dict(extra_kw) if make_dict else Obj(dict, "dict", extra_kw, args.kwarg.arg)
    return bound


def spread_tuple(b: Any, error: Callable[[str], Exception]) -> tuple:
    """The items of `*b` at a call: a tuple binding (globals' tuples are captured as such)."""
    if isinstance(b, tuple):
        return b
    raise error("*-unpacking in a call needs a tuple whose length is known when zymo reads the function")


def spread_dict(b: Any, capture: Callable[[dict], dict], error: Callable[[str], Exception],
                items: Callable[[Any], dict | None] = lambda b: None) -> dict:
    """The items of `**b` at a call: a dict built in the function (`items(b)` reads its
    contents), a dict record, or a compile-time (captured) dict with string keys whose items
    `capture(d)` turns into bindings (guarded: its keys and each value re-checked at every call)."""
    from .bindings import S

    built = items(b)
    if built is not None:
        if not all(isinstance(k, str) for k in built):
            raise error("**-unpacking in a call needs a dict with string keys")
        return built
    if isinstance(b, Obj) and b.kind == "dict":
        return dict(b.fields)
    if isinstance(b, S) and isinstance(b.obj, dict) and all(isinstance(k, str) for k in b.obj):
        return capture(b.obj)
    raise error("**-unpacking in a call needs a dict with constant string keys")
