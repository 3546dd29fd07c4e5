"""Placeholder: filled in by the module's implementation."""

__all__: list[str] = []
