"""KEP-4322 duplicates: the member index kept as profiles come and go agrees with a recount."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.fleet.members import MEMBER_ID_LABEL, MemberIndex

_KEYS = [f"ns{n}/p{i}" for n in range(2) for i in range(4)]
_step = st.tuples(
    st.sampled_from(_KEYS),
    st.one_of(st.none(), st.sampled_from(["a", "b", ""])),  # member id (None: deleted; "": no id)
    st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", None]),
)


def _profile(key: str, member: str, created: str | None) -> dict:
    namespace, name = key.split("/")
    meta: dict = {"name": name, "namespace": namespace, "labels": {MEMBER_ID_LABEL: member}}
    if created:
        meta["creationTimestamp"] = created
    return {"metadata": meta}


@settings(max_examples=200, deadline=None)
@given(st.lists(_step, max_size=40))
def test_duplicates_and_standing_agree_with_a_recount_after_every_change(steps: list) -> None:
    index, held = MemberIndex(), {}
    for key, member, created in steps:
        if member is None:
            index.remove(key)
            held.pop(key, None)
        else:
            index.update(key, _profile(key, member, created))
            held[key] = (member, created)
        groups: dict = {}
        for k, (m, c) in held.items():
            if m:
                groups.setdefault((k.split("/")[0], m), {})[k] = c
        expected = {member: sorted(keys) for member, keys in groups.items() if len(keys) > 1}
        assert index.duplicates() == expected
        not_acted_on = 0
        for keys in groups.values():
            dated = sorted((c, k) for k, c in keys.items() if c)
            if len(keys) == 1:
                winner = next(iter(keys))
            elif dated and (len(dated) == 1 or dated[0][0] != dated[1][0]):
                winner = dated[0][1]  # the one oldest; none when the oldest tie
            else:
                winner = None
            assert all(index.stands(k) == (k == winner) for k in keys)
            not_acted_on += len(keys) - (winner is not None)
        assert index.count() == not_acted_on


def test_creation_times_are_compared_as_instants_whatever_their_spelling() -> None:
    # A file may write a fraction or an offset; as text these sort wrongly or never tie.
    cases = [
        ("2026-01-02T03:04:05.5Z", "2026-01-02T03:04:05Z", "ns0/p1"),  # half a second later
        ("2026-01-02T05:00:00+02:00", "2026-01-02T04:00:00Z", "ns0/p0"),  # 03:00 UTC: older
        ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05+00:00", None),  # one instant: a tie, none stands
        ("not a time", "2026-01-02T03:04:05Z", "ns0/p1"),  # as a profile without one
    ]
    for first, second, winner in cases:
        index = MemberIndex()
        index.update("ns0/p0", _profile("ns0/p0", "a", first))
        index.update("ns0/p1", _profile("ns0/p1", "a", second))
        assert [key for key in ("ns0/p0", "ns0/p1") if index.stands(key)] == ([winner] if winner else []), (first, second)
