"""Python source -> IR (see lower.py)."""
from .lower import lower

__all__ = ["lower"]
