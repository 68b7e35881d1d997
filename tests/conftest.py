"""Shared fixtures: where ../shared is, and the sample capture the README runs on."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.locations import REAL_PCAPS


@pytest.fixture(scope="session")
def real_pcaps() -> Path:
    if not REAL_PCAPS.is_dir():
        pytest.skip(f"real captures not found at {REAL_PCAPS} (../shared beside the project)")
    return REAL_PCAPS
