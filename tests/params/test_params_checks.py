"""The ready-made checks: what is wrong and what is valid, each said once."""

from __future__ import annotations

import pytest

from pmca.mca.params import InvalidValue, ParamValueError, one_of, power_of_two, within

from .conftest import SpaceFactory

POW = "a power of two from 2 to 64"


@pytest.mark.parametrize(
    ("options", "value", "message_end"),
    [
        (within(0, 9), "12", "12 is above 9; valid values: 0 to 9"),
        (within(0, 9), "-1", "-1 is below 0; valid values: 0 to 9"),
        (within(1, unit="bytes"), "0", "0 is below 1; valid values: at least 1 bytes"),
        (power_of_two(2, 64), "24", f"24 is not a power of two; valid values: {POW}"),
        (power_of_two(2, 64), "128", f"128 is above 64; valid values: {POW}"),
        (one_of("a", "b"), "c", "not one of the accepted words; valid values: one of a, b"),
    ],
)  # fmt: skip
def test_a_refused_value_says_each_thing_once(
    make_space: SpaceFactory, options, value, message_end
) -> None:
    space = make_space(api={"test_comp_knob": value})
    kind = str if "one of" in options["valid"] else int
    with pytest.raises(ParamValueError) as refused:
        space.register("test", "comp", "knob", type=kind, default=kind(2), **options)
    message = str(refused.value)
    assert message.endswith(message_end), message
    assert message.count(options["valid"]) == 1, message


def test_a_check_of_ones_own_that_states_the_valid_values_is_not_repeated(
    make_space: SpaceFactory,
) -> None:
    def check(value: int) -> None:
        if value > 9:
            raise InvalidValue("expected 0 to 9")

    space = make_space(api={"test_comp_knob": "12"})
    with pytest.raises(ParamValueError) as refused:
        space.register("test", "comp", "knob", type=int, default=0, check=check, valid="0 to 9")
    assert str(refused.value).endswith("from command line: expected 0 to 9"), str(refused.value)
