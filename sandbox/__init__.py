"""sandbox package."""

__all__: list[str] = []
