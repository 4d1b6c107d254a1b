"""Hostile Leases from other replicas (or a broken hub): whatever a peer's Lease holds — a
malformed or absent ``renewTime``, a huge, negative or zero ``leaseDurationSeconds``, an odd
``holderIdentity``, a status-URL annotation that is not a URL — this replica keeps watching,
stays fresh, and never announces a URL that is not one."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cpcreds.shard import Shard
from cpcreds.shard.membership import GROUP_LABEL, STATUS_ANNOTATION
from tests.fakes.hub import HubServer, lease
from tests.fleet_harness import until
from tests.test_shard import NAMESPACE, make_shard  # noqa: F401 - the fixture

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
_durations = st.one_of(st.sampled_from([0, -1, -(2**63), 2**31, 2**63, 10**400, 1.5, "15", True, None, float("inf")]), _json)
_renew_times = st.one_of(st.sampled_from(["", "yesterday", "2026-13-45T99:99:99.000000Z", "9999-12-31T23:59:59.999999Z", None, 0]), _json)
_holders = st.one_of(st.sampled_from(["", "alpha", " ", "x" * 10_000, "a\r\nLocation: https://evil.test", "\x00"]), _json, st.text(max_size=30))
_urls = st.one_of(
    st.sampled_from(["not a url", "https://user:pass@evil.test", "javascript:alert(1)", "https://evil.test/\r\nX: y", "http://[::1]:8443", "https://ok.test:443", ""]),
    _json,
)
_counter = itertools.count()


def hostile(spec: dict[str, Any], annotation: Any, metadata_extra: dict[str, Any]) -> dict[str, Any]:
    item = lease(NAMESPACE, f"hostile-{next(_counter)}", "h", labels={GROUP_LABEL: "cpcreds"})
    item["spec"] = spec
    item["metadata"]["annotations"] = {STATUS_ANNOTATION: annotation}
    item["metadata"].update(metadata_extra)
    return item


def test_hostile_peer_leases_never_break_the_watch_or_fence_this_replica(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    # A renew deadline of 6 s, not the suite's 0.6 s: on a busy machine a watch can end for other
    # reasons (seen once, with an example that passes on its own) and the relist after it take
    # longer than 0.6 s, which would make alpha stale for a moment without any hostile Lease.
    alpha = make_shard("alpha", lease_duration=10.0, renew_deadline=6.0)
    until(alpha.claiming, timeout=5, what="alpha claiming")

    # No shrinking: each failing example waits out its marker (seconds), and shrinks run hundreds.
    @settings(max_examples=40, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate], suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(
        holder=_holders,
        duration=_durations,
        renew=_renew_times,
        annotation=_urls,
        spec_extra=st.dictionaries(st.sampled_from(["acquireTime", "leaseTransitions", "preferredHolder"]), _json, max_size=2),
    )
    def survives(holder: Any, duration: Any, renew: Any, annotation: Any, spec_extra: dict[str, Any]) -> None:
        spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renew, **spec_extra}
        hub.put(hostile(spec, annotation, {}))
        # A well-formed Lease written after it: seen only if the hostile one did not break the watch.
        marker = f"marker-{next(_counter)}"
        hub.put(lease(NAMESPACE, f"cpcreds-{marker}", marker, labels={GROUP_LABEL: "cpcreds"}))
        until(lambda: marker in alpha.membership.members, timeout=3, what=f"{marker} seen after a hostile Lease {json.dumps(spec, default=str)[:200]}")
        assert alpha.fresh()
        for member, url in alpha.membership.status_urls.items():
            assert isinstance(member, str)
            assert url == "" or (url.startswith(("http://", "https://")) and "@" not in url and "\r" not in url and "\n" not in url), url

    survives()


def test_a_lease_whose_metadata_is_not_an_object_is_skipped(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    alpha = make_shard("alpha")
    until(alpha.claiming, timeout=5, what="alpha claiming")
    for odd in ({"annotations": ["x"]}, {"annotations": "x"}, {"resourceVersion": ["1"]}):
        hub.put(hostile({"holderIdentity": "odd", "leaseDurationSeconds": 15}, "https://odd.test", odd))
        marker = f"marker-{next(_counter)}"
        hub.put(lease(NAMESPACE, f"cpcreds-{marker}", marker, labels={GROUP_LABEL: "cpcreds"}))
        until(lambda: marker in alpha.membership.members, timeout=5, what=f"{marker} seen after metadata {odd}")
    assert alpha.fresh()
