"""The ``math`` reward: final-answer extraction and sympy value equivalence (LaTeX and plain text).

Importing this package registers the reward ``math``. See :mod:`rewards.math.reward` for the pipeline and
statuses, :mod:`rewards.math.compare` for the equivalence rules.
"""

from rewards.math.compare import Options, equivalent
from rewards.math.extract import Extraction, extract_answer
from rewards.math.parse import ParseError
from rewards.math.reward import math_reward, parse_answer, verify

__all__ = [
    "math_reward",
    "verify",
    "parse_answer",
    "extract_answer",
    "Extraction",
    "equivalent",
    "Options",
    "ParseError",
]
