"""Where the project lives on the web: its metadata's URLs (``[project.urls]`` in
pyproject.toml), for help texts that point to documentation the package does not install."""

from __future__ import annotations

import importlib.metadata


def project_url(label: str) -> str:
    """A URL of the project's metadata (``[project.urls]`` in pyproject.toml) by its label."""
    for entry in importlib.metadata.metadata("isolane").get_all("Project-URL") or ():
        name, _, url = entry.partition(",")
        if name.strip() == label:
            return url.strip()
    raise LookupError(f"no {label} URL in isolane's metadata")


def doc_url(page: str) -> str:
    """The URL of a page of the documentation (docs/ is not installed with the package)."""
    return f"{project_url('Documentation').replace('/tree/', '/blob/')}/{page}"
