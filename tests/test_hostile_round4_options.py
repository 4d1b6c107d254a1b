"""cpcreds.sdk.Options against hostile option values: any mapping is read or refused with one
OptionError line naming the option, never quoting the value, and every bound holds for what is
read (NaN, which compares false to everything, passed any min/max before)."""

from __future__ import annotations

import math
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.sdk import Duration, Options, option
from cpcreds.sdk import OptionError

SECRET = "hunter2-r0und4-s3cret"


class Bounded(Options):
    """Every kind of option, bounded where bounds apply."""

    count: int = option(1, min=1, max=60, description="a whole number")
    ratio: float = option(1.0, min=0.5, max=2.0, description="a number")
    wait: Duration = option(30.0, min=1, max=3600, description="a duration")
    name: str = option("x", min=1, max=20, pattern=r"[a-z]+", description="a name")
    tags: list[str] = option([], max=3, description="tags")
    mode: Literal["a", "b"] = option("a", description="a mode")
    flag: bool = option(False, description="a flag")
    maybe: float | None = option(None, min=0, max=1, description="optional")


_values = st.one_of(
    st.sampled_from([SECRET, "nan", "NaN", "inf", "-inf", "1e999", " 7 ", "9" * 5000, "١٢", "1h", "1e3s", "0x10", "", "true"]),
    st.floats(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.none(),
    st.lists(st.text(max_size=5) | st.integers(), max_size=5),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.text(max_size=30),
)
_keys = st.sampled_from(["count", "ratio", "wait", "name", "tags", "mode", "flag", "maybe", "Count", "cuont", SECRET])


@settings(max_examples=400, deadline=None)
@given(given_=st.dictionaries(_keys, _values, max_size=4))
def test_any_options_are_read_within_their_bounds_or_refused_in_one_line(given_: dict[str, Any]) -> None:
    try:
        read = Bounded.read(given_)
    except OptionError as exc:
        text = str(exc)
        assert "\n" not in text and len(text) < 300
        # An unknown key is named (it is the option, not its value); no value is ever shown.
        assert SECRET not in exc.problem
        return
    assert 1 <= read.count <= 60
    assert 0.5 <= read.ratio <= 2.0
    assert 1 <= read.wait <= 3600
    assert read.maybe is None or 0 <= read.maybe <= 1
    assert 1 <= len(read.name) <= 20 and len(read.tags) <= 3
    assert not any(isinstance(v, float) and math.isnan(v) for v in vars(read).values())


def test_nan_is_out_of_any_bounds() -> None:
    for value in ("nan", float("nan")):
        for key in ("ratio", "maybe"):
            try:
                Bounded.read({key: value})
            except OptionError as exc:
                assert str(exc).startswith(f"option {key}: must be between")
            else:
                raise AssertionError(f"{key}={value!r} was read")
