"""ImageCredentials against real plugin processes (tests/fakes/kubelet_plugin.py): what a plugin
is sent, how answers merge, every cache rule, the single flight, timeouts, hostile answers."""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cpcreds import (
    ImageCredentialError,
    ImageCredentials,
    InvalidImageError,
    PluginExecutionError,
    PluginNotFound,
    PluginOutputError,
    PluginTimeout,
)
from cpcreds.images.cache import Flight, ImageCredentialCache
from cpcreds.images.protocol import CredentialProviderResponse
from cpcreds.images.reference import parse_image
from tests.fakes.kubelet_plugin import install, provider_entry, runs, write_config

SECRET = "hunter2-never-shown"


class Clock:
    """A clock the test moves (monotonic seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    """A bin dir and a config in tmp_path, and the run counter every plugin writes to."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.bin = tmp_path / "bin"
        self.count = tmp_path / "runs"
        self.clock = Clock()

    def plugin(self, name: str, *args: str) -> None:
        install(self.bin, name, "--count-file", str(self.count), *args)

    def open(self, *providers: dict[str, Any], **options: Any) -> ImageCredentials:
        config = write_config(self.dir / "config.json", *providers)
        options.setdefault("clock", self.clock)
        return ImageCredentials.from_kubelet_config(config, self.bin, **options)

    def runs(self) -> list[str]:
        return runs(self.count)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


def threads_waiting_on_a_flight() -> int:
    """Threads blocked in Flight.wait: the callers sharing a plugin run."""
    waiting = 0
    for frame in sys._current_frames().values():
        if any(entry.name == "wait" and entry.filename.endswith("cpcreds/engine/flight.py") for entry in traceback.extract_stack(frame)):
            waiting += 1
    return waiting


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count

    def target(index: int) -> None:
        try:
            results[index] = work(index)
        except Exception as exc:  # the test looks at what each caller got
            results[index] = exc

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    return [threads, results]  # type: ignore[list-item]


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()


# -- what a plugin is sent, what get returns ------------------------------------------------------


def test_plugin_gets_the_repository_in_the_configured_api_version_with_args_and_env(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    record = node.dir / "record.jsonl"
    node.plugin("acr", "--auth", "REGISTRY=user:" + SECRET, "--record", str(record), "--record-env", "FROM_CONFIG",
                "--record-env", "FROM_PROCESS", "--record-env", "OVERRIDDEN")
    monkeypatch.setenv("FROM_PROCESS", "process")
    monkeypatch.setenv("OVERRIDDEN", "process")
    entry = provider_entry("acr", "*.azurecr.io", apiVersion="credentialprovider.kubelet.k8s.io/v1beta1", args=["--flag", "value"],
                           env=[{"name": "FROM_CONFIG", "value": "config"}, {"name": "OVERRIDDEN", "value": "config"}])
    with node.open(entry) as images:
        credentials = images.get("team.azurecr.io/app/web:1.2@sha256:" + "c" * 64)
    seen = json.loads(record.read_text())
    assert seen["request"] == {"apiVersion": "credentialprovider.kubelet.k8s.io/v1beta1", "kind": "CredentialProviderRequest",
                               "image": "team.azurecr.io/app/web"}
    assert seen["extra"] == ["--flag", "value"]
    assert seen["env"] == {"FROM_CONFIG": "config", "FROM_PROCESS": "process", "OVERRIDDEN": "config"}
    assert [(c.key, c.username, c.password, c.provider) for c in credentials] == [("team.azurecr.io", "user", SECRET, "acr")]
    assert (credentials.image, credentials.registry) == ("team.azurecr.io/app/web", "team.azurecr.io")


def test_image_no_provider_matches_runs_nothing_and_has_no_credentials(node: Node) -> None:
    node.plugin("gcr", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("gcr", "gcr.io")) as images:
        credentials = images.get("quay.io/team/app")
        assert list(credentials) == [] and not credentials
        assert images.providers_for("quay.io/team/app") == []
    assert node.runs() == []


def test_docker_hub_short_names_are_asked_for_as_the_kubelet_names_them(node: Node) -> None:
    node.plugin("hub", "--auth", "https://index.docker.io/v1/=hubuser:" + SECRET)
    with node.open(provider_entry("hub", "docker.io")) as images:
        credentials = images.get("nginx:1.27")
    assert node.runs() == ["docker.io/library/nginx"]
    assert [(c.key, c.username) for c in credentials] == [("index.docker.io", "hubuser")]
    assert credentials.docker_config()["auths"]["https://index.docker.io/v1/"]["username"] == "hubuser"


def test_only_answer_keys_matching_the_image_are_returned_best_first(node: Node) -> None:
    node.plugin("gcr", "--auth", "gcr.io=registry:a", "--auth", "gcr.io/team=team:b", "--auth", "gcr.io/other=other:c",
                "--auth", "*.gcr.io=wild:d")
    with node.open(provider_entry("gcr", "gcr.io", "*.gcr.io")) as images:
        assert [c.username for c in images.get("gcr.io/team/app")] == ["team", "registry"]
        assert [c.username for c in images.get("eu.gcr.io/team/app")] == ["wild"]


def test_answers_of_several_providers_merge_and_the_earlier_provider_wins_a_key(node: Node) -> None:
    node.plugin("first", "--auth", "registry.io=first:a", "--auth", "registry.io/team=first-team:b")
    node.plugin("second", "--auth", "registry.io=second:c", "--auth", "*.io=second-wild:d", "--auth", "registry.io/team/app=second-app:e")
    with node.open(provider_entry("first", "registry.io"), provider_entry("second", "*.io")) as images:
        credentials = images.get("registry.io/team/app")
    assert [(c.key, c.username, c.provider) for c in credentials] == [
        ("registry.io/team/app", "second-app", "second"),
        ("registry.io/team", "first-team", "first"),
        ("registry.io", "first", "first"),
        ("*.io", "second-wild", "second"),
    ]


def test_an_auth_key_of_many_stars_is_matched_at_once(node: Node) -> None:
    # 40 stars in one host part used to backtrack a regular expression for minutes, GIL held.
    node.plugin("p", "--auth", "*" * 40 + "x.io=never:a", "--auth", "*" * 40 + ".io=stars:b")
    with node.open(provider_entry("p", "*.io")) as images:
        started = time.monotonic()
        assert [c.username for c in images.get("a" * 120 + ".io/app")] == ["stars"]
        assert time.monotonic() - started < 5.0  # the plugin's own timeout; a match takes microseconds


def test_result_and_credential_reprs_never_show_a_password(node: Node) -> None:
    node.plugin("gcr", "--auth", f"REGISTRY=user:{SECRET}")
    with node.open(provider_entry("gcr", "gcr.io")) as images:
        credentials = images.get("gcr.io/app")
        assert SECRET not in repr(credentials) and SECRET not in repr(credentials[0]) and SECRET not in repr(images)
        assert SECRET in credentials[0].password


def test_docker_config_is_keyed_by_the_images_registry_with_basic_auth(node: Node) -> None:
    node.plugin("local", "--auth", f"registry.local:5000/team=robot:{SECRET}", "--auth", "registry.local:5000=other:x")
    with node.open(provider_entry("local", "registry.local:5000")) as images:
        document = images.get("registry.local:5000/team/app:1").docker_config()
    import base64

    assert document == {"auths": {"registry.local:5000": {"auth": base64.b64encode(f"robot:{SECRET}".encode()).decode(),
                                                          "username": "robot", "password": SECRET}}}


def test_invalid_image_is_refused_before_any_plugin_runs(node: Node) -> None:
    node.plugin("gcr", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("gcr", "gcr.io")) as images:
        with pytest.raises(InvalidImageError, match="lowercase"):
            images.get("gcr.io/Team/app")
        with pytest.raises(InvalidImageError):
            images.get("gcr.io/app:tag with space")
    assert node.runs() == []


# -- caching by cacheKeyType --------------------------------------------------------------------


def test_image_key_caches_per_repository_whatever_the_tag(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Image", "--auth", "IMAGE=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        images.get("registry.io/team/app:1")
        images.get("registry.io/team/app:2")
        images.get("registry.io/team/app@sha256:" + "d" * 64)
        images.get("registry.io/team/other:1")
    assert node.runs() == ["registry.io/team/app", "registry.io/team/other"]


def test_registry_key_caches_per_host_and_port(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Registry", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "*.registry.io", "*.registry.io:5000")) as images:
        images.get("a.registry.io/team/app")
        images.get("a.registry.io/other/app")
        images.get("b.registry.io/team/app")
        images.get("a.registry.io:5000/team/app")
    assert node.runs() == ["a.registry.io/team/app", "b.registry.io/team/app", "a.registry.io:5000/team/app"]


def test_global_key_caches_once_for_every_image_of_the_provider(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Global", "--auth", "*.registry.io=u:p")
    with node.open(provider_entry("p", "*.registry.io")) as images:
        for registry in "abc":
            assert [c.username for c in images.get(f"{registry}.registry.io/app")] == ["u"]
    assert node.runs() == ["a.registry.io/app"]


def test_cache_duration_of_the_answer_wins_over_the_default(node: Node) -> None:
    node.plugin("p", "--cache-duration", "30s", "--auth", "REGISTRY=u:p", "--password-per-run")
    with node.open(provider_entry("p", "registry.io", defaultCacheDuration="1h")) as images:
        assert images.get("registry.io/app")[0].password == "p-1"
        node.clock.now += 29
        assert images.get("registry.io/app")[0].password == "p-1"
        node.clock.now += 2
        assert images.get("registry.io/app")[0].password == "p-2"
    assert len(node.runs()) == 2


def test_default_cache_duration_applies_when_the_answer_has_none(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-per-run")
    with node.open(provider_entry("p", "registry.io", defaultCacheDuration="5m")) as images:
        images.get("registry.io/app")
        node.clock.now += 299
        assert images.get("registry.io/app")[0].password == "p-1"
        node.clock.now += 2
        assert images.get("registry.io/app")[0].password == "p-2"


@pytest.mark.parametrize(
    "plugin_args, default",
    [(("--cache-duration", "0s"), "1h"), ((), "0s"), (("--cache-duration=-5m",), "1h")],
    ids=["answer-says-0", "default-is-0", "negative"],
)
def test_zero_duration_is_not_cached(node: Node, plugin_args: tuple[str, ...], default: str) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", *plugin_args)
    with node.open(provider_entry("p", "registry.io", defaultCacheDuration=default)) as images:
        images.get("registry.io/app")
        images.get("registry.io/app")
    assert len(node.runs()) == 2


def test_failed_run_is_not_cached(node: Node) -> None:
    node.plugin("p", "--fail-runs", "1", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        with pytest.raises(PluginExecutionError, match="provider p: .*exit"):
            images.get("registry.io/app")
        assert [c.username for c in images.get("registry.io/app")] == ["u"]
        images.get("registry.io/app")
    assert len(node.runs()) == 2


def test_cached_lookup_returns_the_same_answer_until_it_expires(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-per-run")
    with node.open(provider_entry("p", "registry.io", defaultCacheDuration="1m")) as images:
        first = images.get("registry.io/app:1")
        assert images.get("registry.io/app:1") is first
        node.clock.now += 61
        assert images.get("registry.io/app:1")[0].password == "p-2"


def test_expired_entries_are_purged_and_the_cache_is_bounded(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Image", "--auth", "IMAGE=u:p")
    with node.open(provider_entry("p", "registry.io", defaultCacheDuration="1m"), purge_interval=60, max_entries=3) as images:
        cache = images._cache
        for index in range(5):
            images.get(f"registry.io/app{index}")
        assert len(cache) == 3  # the two oldest were dropped
        node.clock.now += 61
        images.get("registry.io/fresh")  # a miss after the purge interval sweeps expired entries
        assert len(cache) == 1
        node.clock.now += 61
        assert images.purge() == 1 and len(cache) == 0


def test_clear_forgets_every_answer(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        images.get("registry.io/app")
        images.clear()
        images.get("registry.io/app")
    assert len(node.runs()) == 2


# -- one run per key at a time ----------------------------------------------------------------------


def test_concurrent_lookups_of_one_registry_share_one_run(node: Node) -> None:
    gate = node.dir / "gate"
    node.plugin("p", "--wait-for", str(gate), "--cache-duration", "0s", "--auth", "REGISTRY=u:" + SECRET)
    with node.open(provider_entry("p", "registry.io")) as images:
        threads, results = in_threads(20, lambda i: images.get(f"registry.io/app{i % 4}"))
        wait_until(lambda: threads_waiting_on_a_flight() == 19)  # the answer is not cached: only the flight shares it
        gate.touch()
        join(threads)
    assert len(node.runs()) == 1
    assert all([c.password for c in result] == [SECRET] for result in results)


def test_every_waiter_gets_the_error_of_a_failed_run_and_nothing_is_cached(node: Node) -> None:
    gate = node.dir / "gate"
    node.plugin("p", "--wait-for", str(gate), "--fail-runs", "1", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        threads, results = in_threads(8, lambda i: images.get("registry.io/app"))
        wait_until(lambda: threads_waiting_on_a_flight() == 7)
        gate.touch()
        join(threads)
        assert all(isinstance(r, PluginExecutionError) and "provider p" in str(r) for r in results)
        assert len({id(r) for r in results}) == 8  # each caller raises its own copy
        assert [c.username for c in images.get("registry.io/app")] == ["u"]
    assert len(node.runs()) == 2


def test_a_failed_run_is_the_error_only_of_waiters_for_its_image(node: Node) -> None:
    # reg/bad/app's run fails; reg/good/app, which waited on it (one registry, one run at a
    # time), gets its own run and its credential, never reg/bad/app's error or stderr.
    gate = node.dir / "gate"
    node.plugin("p", "--wait-for", str(gate), "--fail-for", "registry.io/bad/app", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        bad = in_threads(1, lambda i: images.get("registry.io/bad/app"))
        wait_until(lambda: len(node.runs()) == 1)  # the bad image's run is the one under way
        others = in_threads(2, lambda i: images.get("registry.io/good/app" if i == 0 else "registry.io/bad/app"))
        wait_until(lambda: threads_waiting_on_a_flight() == 2)
        gate.touch()
        join(bad[0] + others[0])
        good, bad_waiter = others[1]
        assert [c.username for c in good] == ["u"], good
        assert isinstance(bad[1][0], PluginExecutionError) and "registry.io/bad/app" in str(bad[1][0])
        assert isinstance(bad_waiter, PluginExecutionError)  # same image: the same failure, shared
    assert node.runs() == ["registry.io/bad/app", "registry.io/good/app"]


def test_waiters_for_other_images_run_their_own_when_the_answer_is_per_image(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Image", "--auth", "IMAGE=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        images.get("registry.io/first")  # the provider answers per image: its runs are grouped per image from now on
        threads, results = in_threads(30, lambda i: images.get(f"registry.io/app{i % 3}"))
        join(threads)
        assert all(r[0].key.startswith("registry.io/app") for r in results)
    assert sorted(node.runs()) == ["registry.io/app0", "registry.io/app1", "registry.io/app2", "registry.io/first"]


def test_thousand_lookups_over_fifty_images_of_five_registries_run_five_plugins(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Registry", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "*.registry.io")) as images:
        threads, results = in_threads(1000, lambda i: images.get(f"r{i % 5}.registry.io/app{i % 50}:v1"))
        join(threads)
    assert not [r for r in results if isinstance(r, Exception)]
    assert sorted({image.split("/")[0] for image in node.runs()}) == [f"r{i}.registry.io" for i in range(5)]
    assert len(node.runs()) == 5


def test_an_abandoned_run_sends_its_waiters_back_to_look_again() -> None:
    cache = ImageCredentialCache(clock=lambda: 0.0)
    image = parse_image("registry.io/app")
    flight, leader = cache.begin("p", image, "")  # type: ignore[misc]
    assert leader
    waiter_flight, waiter_leads = cache.begin("p", image, "")  # type: ignore[misc]
    assert waiter_flight is flight and not waiter_leads
    cache.abandon(flight)
    assert flight.abandoned and not flight.applies_to(image)
    again, leads = cache.begin("p", image, "")  # type: ignore[misc]
    assert isinstance(again, Flight) and again is not flight and leads
    entry = cache.finish(again, image, "", CredentialProviderResponse("Registry", cache_duration=60), 0)
    assert cache.begin("p", image, "") == entry


# -- failures and hostile plugins --------------------------------------------------------------------


def test_plugin_that_hangs_is_killed_at_the_timeout(node: Node) -> None:
    node.plugin("p", "--hang")
    with node.open(provider_entry("p", "registry.io"), timeout=0.5) as images:
        started = time.monotonic()
        with pytest.raises(PluginTimeout, match="provider p: .*did not answer within 0.5s"):
            images.get("registry.io/app")
        assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "plugin_args, error, words",
    [
        (("--api-version", "credentialprovider.kubelet.k8s.io/v1alpha1"), PluginOutputError, "apiVersion"),
        (("--cache-key-type", "Forever"), PluginOutputError, "cacheKeyType"),
        (("--kind", "ExecCredential"), PluginOutputError, "kind"),
        (("--raw", "not json"), PluginOutputError, "not a JSON document"),
        (("--raw", ""), PluginOutputError, "not a JSON document"),
        (("--raw", '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse",'
                   '"cacheKeyType":"Registry","auth":{"registry.io":{"username":"u","password":12345678}}}'), PluginOutputError, "password"),
        (("--raw", '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse",'
                   '"cacheKeyType":"Registry","cacheDuration":3600}'), PluginOutputError, "cacheDuration"),
        (("--raw", '[' * 5000), PluginOutputError, "not a JSON document"),
        (("--spam-bytes", str(2 * 1024 * 1024)), PluginExecutionError, "more than"),
        (("--exit-code", "3", "--stderr", f"login failed password={SECRET}"), PluginExecutionError, "exit"),
    ],
    ids=["wrong-api-version", "bad-cache-key-type", "wrong-kind", "not-json", "empty", "password-not-a-string",
         "duration-not-a-string", "too-deep", "huge", "fails"],
)
def test_unusable_answer_is_a_plugin_error_naming_the_provider_and_never_a_secret(
    node: Node, plugin_args: tuple[str, ...], error: type[Exception], words: str
) -> None:
    node.plugin("p", "--auth", f"REGISTRY=u:{SECRET}", *plugin_args)
    with node.open(provider_entry("p", "registry.io")) as images:
        with pytest.raises(error) as caught:
            images.get("registry.io/app")
        images.get  # the instance stays usable
    message = str(caught.value)
    assert message.startswith("provider p: ") and words in message and "\n" not in message
    assert SECRET not in message and "12345678" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None or SECRET not in repr(caught.value.__context__)


def test_unusable_answer_is_not_cached(node: Node) -> None:
    node.plugin("p", "--cache-key-type", "Nope")
    with node.open(provider_entry("p", "registry.io")) as images:
        for _ in range(2):
            with pytest.raises(PluginOutputError):
                images.get("registry.io/app")
    assert len(node.runs()) == 2


def test_plugin_removed_after_loading_is_plugin_not_found(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io")) as images:
        (node.bin / "p").unlink()
        with pytest.raises(PluginNotFound, match="provider p"):
            images.get("registry.io/app")


def test_close_kills_running_plugins_and_refuses_later_lookups(node: Node) -> None:
    node.plugin("p", "--hang")
    images = node.open(provider_entry("p", "registry.io"), timeout=30)
    threads, results = in_threads(1, lambda i: images.get("registry.io/app"))
    wait_until(lambda: len(node.runs()) == 1)
    started = time.monotonic()
    images.close()
    join(threads)
    assert time.monotonic() - started < 10
    assert isinstance(results[0], PluginExecutionError)
    with pytest.raises(ImageCredentialError, match="closed"):
        images.get("registry.io/app")
    images.close()  # idempotent


# -- service-account tokens -----------------------------------------------------------------------

TOKEN_ATTRIBUTES = {
    "serviceAccountTokenAudience": "registry.io",
    "requireServiceAccount": True,
    "requiredServiceAccountAnnotationKeys": ["registry.io/role"],
    "optionalServiceAccountAnnotationKeys": ["registry.io/team"],
    "cacheType": "ServiceAccount",
}


def test_token_and_named_annotations_are_sent_to_a_provider_that_asks(node: Node) -> None:
    record = node.dir / "record.jsonl"
    token_file = node.dir / "token"
    token_file.write_text(SECRET + "\n")
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-from-token", "--record", str(record))
    # cacheType Token: the kubelet refuses an answer that is the token itself under ServiceAccount.
    entry = provider_entry("p", "registry.io", tokenAttributes={**TOKEN_ATTRIBUTES, "cacheType": "Token"})
    annotations = {"registry.io/role": "puller", "registry.io/team": "web", "unrelated": "x"}
    with node.open(entry, service_account_token_file=token_file, service_account_annotations=annotations) as images:
        credentials = images.get("registry.io/app")
    request = json.loads(record.read_text())["request"]
    assert request["serviceAccountToken"] == SECRET
    assert request["serviceAccountAnnotations"] == {"registry.io/role": "puller", "registry.io/team": "web"}
    assert credentials[0].password == SECRET


def test_provider_requiring_a_service_account_without_a_token_is_refused_clearly(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=TOKEN_ATTRIBUTES)) as images:
        with pytest.raises(ImageCredentialError, match="provider p: tokenAttributes.requireServiceAccount is true, but no service-account token"):
            images.get("registry.io/app")
    assert node.runs() == []


def test_provider_not_requiring_a_service_account_runs_without_a_token(node: Node) -> None:
    record = node.dir / "record.jsonl"
    node.plugin("p", "--auth", "REGISTRY=u:p", "--record", str(record))
    attributes = {**TOKEN_ATTRIBUTES, "requireServiceAccount": False, "requiredServiceAccountAnnotationKeys": []}
    with node.open(provider_entry("p", "registry.io", tokenAttributes=attributes)) as images:
        images.get("registry.io/app")
    assert "serviceAccountToken" not in json.loads(record.read_text())["request"]


def test_missing_required_annotation_skips_the_provider_and_the_plugin_is_not_run(node: Node) -> None:
    # As the kubelet: the plugin is not called and gives no credentials; the pull goes on without them.
    token_file = node.dir / "token"
    token_file.write_text("t")
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=TOKEN_ATTRIBUTES), service_account_token_file=token_file) as images:
        assert list(images.get("registry.io/app")) == []
    assert node.runs() == []


def test_token_cache_type_keeps_answers_per_token(node: Node) -> None:
    token_file = node.dir / "token"
    token_file.write_text("token-one")
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-from-token")
    attributes = {**TOKEN_ATTRIBUTES, "cacheType": "Token"}
    with node.open(provider_entry("p", "registry.io", tokenAttributes=attributes), service_account_token_file=token_file,
                   service_account_annotations={"registry.io/role": "r"}) as images:
        assert images.get("registry.io/app")[0].password == "token-one"
        assert images.get("registry.io/app")[0].password == "token-one"
        token_file.write_text("token-two")  # rotated
        assert images.get("registry.io/app")[0].password == "token-two"
    assert len(node.runs()) == 2


def test_unreadable_token_file_is_an_error_that_does_not_quote_it(node: Node) -> None:
    token_file = node.dir / "token"
    token_file.write_bytes(b"\xff\xfe" + SECRET.encode())
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=TOKEN_ATTRIBUTES), service_account_token_file=token_file,
                   service_account_annotations={"registry.io/role": "r"}) as images:
        with pytest.raises(ImageCredentialError, match="not UTF-8") as caught:
            images.get("registry.io/app")
    assert SECRET not in str(caught.value) and caught.value.__context__ is None


@pytest.mark.parametrize(
    "options, words",
    [({"timeout": 0}, "timeout"), ({"timeout": float("nan")}, "timeout"), ({"max_entries": 0}, "max_entries"),
     ({"purge_interval": -1}, "purge_interval"), ({"service_account_annotations": {"a": 1}}, "annotations")],
)
def test_bad_options_are_image_credential_errors(node: Node, options: dict[str, Any], words: str) -> None:
    node.plugin("p")
    with pytest.raises(ImageCredentialError, match=words):
        node.open(provider_entry("p", "registry.io"), **options)
