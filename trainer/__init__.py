"""trainer package."""

__all__: list[str] = []
