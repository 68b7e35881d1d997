"""The codes of the records and compiled arrays have one source, the Rust enums (``rust/codes.rs``):
the Python enums, the policy's code tables and the names its ``Literal`` types spell agree with it."""

from __future__ import annotations

import enum
from typing import get_args

import pytest

import isolane
from isolane import _core
from isolane.codes import CODES, ENUMS
from isolane.policy import constants
from isolane.policy.model import ColorAction

RUST = _core.codes()


def test_every_family_has_distinct_names_and_byte_codes() -> None:
    for family, pairs in RUST.items():
        names = [name for name, _ in pairs]
        codes = [code for _, code in pairs]
        assert len(set(names)) == len(names) and len(set(codes)) == len(codes), family
        assert all(name == name.lower() and name.isidentifier() for name in names), family
        assert all(0 <= code <= 255 for code in codes), family


def test_codes_is_the_core_export() -> None:
    assert CODES == {family: dict(pairs) for family, pairs in RUST.items()}


@pytest.mark.parametrize("family", sorted(ENUMS))
def test_each_enum_is_its_family_in_upper_case(family: str) -> None:
    members = ENUMS[family]
    assert [(member.name.lower(), member.value) for member in members] == RUST[family]
    assert getattr(isolane, members.__name__) is members, "the enum is public as isolane.<Name>"
    assert members.__doc__ and not members.__doc__.startswith("An enumeration"), "the enum keeps its docstring"


def test_the_record_enums_are_all_there() -> None:
    made = {members.__name__ for members in ENUMS.values()}
    assert made == {"Status", "Tunnel", "Reason", "Action", "Color", "Outcome", "BurstScope", "BurstView", "ProfileId", "SwitchCause"}


def test_an_enum_that_does_not_follow_its_family_is_refused() -> None:
    from isolane.codes import _check

    class Tunnel(enum.IntEnum):
        NONE = 0
        VXLAN = 1

    with pytest.raises(ImportError, match="'tunnel' codes are"):
        _check("tunnel", Tunnel)


def test_the_policy_code_tables_are_the_core_codes() -> None:
    assert {**constants.METER_KINDS, "none": constants.METER_NONE} == CODES["meter_kind"]
    assert {**constants.COLORS, "none": isolane.Color.NONE} == CODES["color"]
    assert constants.COUNT_MODES == CODES["count"]
    assert constants.COLOR_ACTIONS == CODES["color_action"]
    assert constants.PORT_MODES == CODES["port_mode"]
    assert (constants.ACTION_DROP, constants.ACTION_ALLOW) == (CODES["action"]["drop"], CODES["action"]["allow"])


def test_the_literal_types_spell_the_core_names() -> None:
    """The ``Literal`` types cannot be built at run time; they must name what the core codes."""
    assert get_args(constants.MeterKind) == tuple(constants.METER_KINDS)
    assert get_args(constants.CountMode) == tuple(CODES["count"]) == tuple(constants.COUNT_OVERHEAD)
    assert get_args(constants.ColorName) == tuple(constants.COLORS)
    assert get_args(constants.PortMode) == tuple(CODES["port_mode"])
    assert set(get_args(constants.ActionName)) == set(constants.ACTIONS) == set(CODES["action"])
    pass_or_drop, remark = get_args(ColorAction)
    assert {*get_args(pass_or_drop), remark.__name__.lower()} == set(CODES["color_action"])
