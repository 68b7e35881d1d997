"""The garbage collector is paused while a policy is read or installed (isolane/pause_gc.py), and
is as it was afterwards: on after success, on after an error, off if it was off."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from isolane import Engine
from isolane.pause_gc import gc_paused
from isolane.policy import Policy, PolicyError

POLICY = {"tenants": [{"name": "a", "vnis": [1], "rules": [{"dst": "10.0.0.0/8", "action": "allow"}]}]}


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_the_collector_is_off_inside_and_back_on_after_nested_pauses(collector_on: None) -> None:
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause found it off and left it so
    assert gc.isenabled()


def test_a_pause_leaves_a_collector_that_was_off_off(collector_on: None) -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_reading_and_installing_a_policy_pause_it_and_leave_it_on(collector_on: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    from isolane.policy import policy as policy_module

    build = policy_module._build
    install = Engine._install
    monkeypatch.setattr(policy_module, "_build", lambda *args: (seen.append(gc.isenabled()), build(*args))[1])
    monkeypatch.setattr(Engine, "_install", lambda *args: (seen.append(gc.isenabled()), install(*args))[1])
    engine = Engine(Policy.from_dict(POLICY))
    assert seen == [False, False] and gc.isenabled()
    engine.update(Policy.from_dict({"tenants": [{"name": "b", "vnis": [2]}]}))
    assert seen == [False, False, False, False] and gc.isenabled()
    with pytest.raises(PolicyError):
        Policy.from_dict({"tenants": [{"name": "a", "vnis": ["x"]}]})
    assert gc.isenabled()
