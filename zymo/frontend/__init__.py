"""Python source -> IR (see lower.py and the mixins it lists)."""
from .lower import lower

__all__ = ["lower"]
