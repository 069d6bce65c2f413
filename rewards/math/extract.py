r"""The math reward's final-answer finder is the one every reward uses: :mod:`rewards.final_answer`.

>>> extract_answer(r"so \boxed{5}").answer, extract_answer(r"\boxed{5}<think>\boxed{3}").answer
('5', None)
"""

from rewards.final_answer import MAX_COMPLETION_CHARS, Extraction, extract_answer

__all__ = ["Extraction", "extract_answer", "MAX_COMPLETION_CHARS"]
