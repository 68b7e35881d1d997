"""A policy read as its outcome, so that two ways of reading one document can be compared."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isolane.policy import Policy, PolicyError, PolicyWarning

Outcome = tuple[str, Any, Any]


def outcome(read: Callable[[], Policy]) -> Outcome:
    """("policy", the policy, its warnings) or ("errors", the errors, None)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PolicyWarning)
            policy = read()
    except PolicyError as err:
        return "errors", err.errors, None
    return "policy", policy, policy.warnings


def file_outcome(text: str) -> Outcome:
    """The outcome of ``Policy.from_file`` on ``text`` in a YAML file, its warnings without the
    file's name."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.yaml"
        path.write_text(text, encoding="utf-8")
        read = outcome(lambda: Policy.from_file(path))
    if read[0] == "policy":
        read = (read[0], read[1], tuple(w.removeprefix(f"{path}: ") for w in read[2]))
    return read
