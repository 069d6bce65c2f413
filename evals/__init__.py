"""evals package."""

__all__: list[str] = []
