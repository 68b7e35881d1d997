"""Shared fixtures: where ../shared is; the namespace pair of the kernel tests (support/netns.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.locations import REAL_PCAPS
from support.netns import A, namespaces


@pytest.fixture(scope="session")
def real_pcaps() -> Path:
    if not REAL_PCAPS.is_dir():
        pytest.skip(f"real captures not found at {REAL_PCAPS} (../shared beside the project)")
    return REAL_PCAPS


@pytest.fixture(scope="module")
def pair() -> Iterator[None]:
    """The namespace pair for a test module (each module that asks gets its own)."""
    with namespaces():
        yield


@pytest.fixture
def clean(pair: None) -> Iterator[None]:
    """va0 with its default qdisc before and after the test."""
    from isolane.linux import remove

    remove("va0", A)
    yield
    remove("va0", A)
