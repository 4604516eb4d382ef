"""The package's imports point one way: from a later stage to an earlier one.

Every module of `zymo` is placed in one layer of `LAYERS` (stage order: the IR, the rule
registry, the frontend, the analyses, the transforms, code generation, then the pipeline
and the public API, then what is built on it). A module may import modules of its own
layer and of earlier layers, never of a later one; imports are read from the source
(`ast`), at module level and inside functions alike (a lazy import is still an arrow).
`ALLOWED` lists the few arrows that still point back, each with the reason it stays.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "zymo"

# (layer, the modules and packages in it); a name covers the packages and modules under it
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("zymo.errors", "zymo.config", "zymo.annotations", "zymo.pyast")),
    ("runtime", ("zymo.runtime",)),  # the helpers generated code calls: NumPy only
    ("ir", ("zymo.ir",)),
    ("rules", ("zymo.rules",)),
    ("frontend", ("zymo.frontend", "zymo.shadows", "zymo.data")),  # values at the API boundary
    ("analysis", ("zymo.analysis",)),
    ("transform", ("zymo.transform",)),
    ("codegen", ("zymo.codegen",)),
    ("pipeline", ("zymo.pipeline",)),
    ("boundary", ("zymo.boundary",)),
    ("cache", ("zymo.cache", "zymo.draws")),  # draws: the generator across the passes cache.call runs
    ("derived", ("zymo.derivatives", "zymo.sparse")),  # operators on top of `cache.call`
    ("api", ("zymo.api",)),
    ("package", ("zymo",)),  # zymo/__init__.py: only the package module itself
    ("interface", ("zymo.interface", "zymo.testing")),
]

# (importing module, imported module, why the arrow stays); names cover what is under them
ALLOWED: list[tuple[str, str, str]] = [
    # the IR passes run right after lowering consult the rules (and specialize the activity
    # analysis): moving them out of ir/ is the next step of the restructure
    ("zymo.ir.specialize", "zymo.rules.registry", "specialize asks each op's rule"),
    ("zymo.ir.specialize", "zymo.analysis.activity", "check_copies_of_views needs memory roots"),
    ("zymo.ir.verify", "zymo.rules.registry", "the verifier checks that every prim has a rule"),
    # type inference runs while the frontend builds ops, on the rules' example values
    ("zymo.rules", "zymo.analysis.types", "rules register result types and type examples"),
    ("zymo.frontend", "zymo.analysis.types", "the frontend types each op as it builds it"),
    # files other parts of the restructure own (change there: real code motion, not imports)
    ("zymo.rules.coverage", "zymo.frontend.several", "coverage lists what the frontend lowers itself"),
    # at run time, not while compiling: a checkpointed call's adjoint is zymo's reverse mode of it
    ("zymo.rules.checkpoint_call", "zymo.cache", "the adjoint reruns fn under cache.call"),
]


def _covers(name: str, module: str) -> bool:
    return module == name or (name != "zymo" and module.startswith(name + "."))


def _layer(module: str) -> int:
    found = [(len(name), k) for k, (_, names) in enumerate(LAYERS) for name in names if _covers(name, module)]
    assert found, f"{module} is in no layer of tests/test_layering.py: place it in the stage it belongs to"
    return max(found)[1]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """The zymo modules `module` imports, with the line of each import."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "zymo"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "zymo":
                continue
            # `from . import config`: the imported name is itself a module
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            out += [(s, node.lineno) for s in subs] or [(target, node.lineno)]
    return out


def _allowed(src: str, dst: str) -> bool:
    return any(_covers(a, src) and _covers(b, dst) for a, b, _ in ALLOWED)


@functools.cache
def _all_imports() -> dict[str, list[tuple[str, int]]]:
    """Every module's `_imports`, parsed once for the file's tests."""
    known = _modules()
    return {module: _imports(module, path, known) for module, path in sorted(known.items())}


def _back_edges() -> list[str]:
    known = _modules()
    bad = []
    for module, path in sorted(known.items()):
        for target, line in _all_imports()[module]:
            if _layer(target) > _layer(module) and not _allowed(module, target):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({LAYERS[_layer(module)][0]}) "
                           f"imports {target} ({LAYERS[_layer(target)][0]})")
    return bad


def test_every_module_has_a_layer():
    for module in _modules():
        _layer(module)


def test_imports_point_from_later_stages_to_earlier_ones():
    assert _back_edges() == []


def test_every_allowed_back_edge_is_still_there():
    """An entry of ALLOWED that no import uses any more is removed, so the list stays short."""
    edges = {(m, t) for m, targets in _all_imports().items() for t, _ in targets if _layer(t) > _layer(m)}
    unused = [(a, b) for a, b, _ in ALLOWED if not any(_covers(a, m) and _covers(b, t) for m, t in edges)]
    assert unused == []


def test_the_check_sees_function_level_imports(tmp_path):
    """A lazy import inside a function is an arrow too (the check must not miss it)."""
    src = tmp_path / "mod.py"
    src.write_text("def f():\n    from ..api import autodiff\n    return autodiff\n")
    assert _imports("zymo.ir.mod", src, {"zymo.api": src}) == [("zymo.api", 2)]
