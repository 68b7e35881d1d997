"""Policies as dicts with one value changed, and what validation says of them, for the policy tests."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest

from isolane.policy import Policy, PolicyError, PolicyWarning

#: As the value of :func:`edited`: delete the key instead.
DELETE = object()


def edited(policy: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """A deep copy of ``policy`` with the item at ``path`` set to ``value`` (or deleted)."""
    data = copy.deepcopy(policy)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


def errors_of(data: Any) -> list[tuple[str, str]]:
    """The (place, problem) pairs that validating ``data`` raises (warnings aside)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        with pytest.raises(PolicyError) as info:
            Policy.from_dict(data)
    return info.value.errors


def quiet(data: Any) -> Policy:
    """from_dict, failing the test on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return Policy.from_dict(data)


def policy_warnings(data: Any) -> list[str]:
    """The policy's warnings, as Python's warnings and as ``Policy.warnings`` (which must agree)."""
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        policy = Policy.from_dict(data)
    messages = [str(w.message) for w in found if issubclass(w.category, PolicyWarning)]
    assert messages == list(policy.warnings)
    return messages


def assert_schema_accepts_if_isolane_does(validator: Any, data: dict[str, Any]) -> None:
    """The JSON Schema must not be stricter than validation: a policy isolane accepts, it
    accepts too."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PolicyWarning)
            Policy.from_dict(data)
    except PolicyError:
        return
    assert list(validator.iter_errors(data)) == []
