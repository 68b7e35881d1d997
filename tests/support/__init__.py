"""Helpers the tests and benchmarks share: references, traffic generators, input locations.

Found through pytest's ``pythonpath = ["tests", "bench"]`` (pyproject.toml), so a test in
``tests/`` or ``bench/`` imports them as ``from support.truth import ...``.
"""
