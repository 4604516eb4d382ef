"""Settings, read from environment variables at call time.

- `ZYMO_CHECK_IR=1`: run the IR verifier after lowering (on in the test suite).
- `ZYMO_SHOW_CODE=1`: print every generated derivative program when it is compiled.
"""
from __future__ import annotations

import os


def check_ir() -> bool:
    return os.environ.get("ZYMO_CHECK_IR", "0") not in ("", "0")


def show_code() -> bool:
    return os.environ.get("ZYMO_SHOW_CODE", "0") not in ("", "0")
