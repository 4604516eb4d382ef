"""Test settings: the IR verifier runs after every lowering; hypothesis is deterministic."""
import os

os.environ.setdefault("ZYMO_CHECK_IR", "1")

try:
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
    settings.load_profile("ci")
except ImportError:  # pragma: no cover
    pass

import zymo.rules  # noqa: E402

zymo.rules.load_all()  # the lazily registered rules too (`rules.registry.LAZY`): the rule tests list them all
