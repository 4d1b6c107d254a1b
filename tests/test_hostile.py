"""Hostile input: whatever a config file, a ClusterProfile or a plugin answer holds, the Python API
raises only cpcreds errors, fast, in little memory, and never with a secret in the message or in
any exception chained to it (``__cause__`` / ``__context__``, even a suppressed one)."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import CredentialError, ProviderConfig, load_config, resolve
from cpcreds.config.documents import MAX_INT_DIGITS, DocumentError, load_document, load_documents, plain_copy
from cpcreds.config.access import parse_profile
from cpcreds.config.wire import ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, EXEC_EXTENSION
from cpcreds.config import MAX_CONFIG_BYTES
from cpcreds.config.profiles import load_profiles
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

#: Placed wherever a secret may sit (env values, args, extension values, options); must never
#: appear in an error.
SECRET = "S3CRET-marker-9f2c"

#: Fewer examples in CI (``CI=true``) keep this file well under 30 s there.
EXAMPLES = int(os.environ.get("CPCREDS_HYPOTHESIS_EXAMPLES", "40" if os.environ.get("CI") else "150"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
#: Bound on one hostile call (generous: CI machines are slow; the real cost is milliseconds).
TIME_LIMIT = 2.0

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


# -- helpers -------------------------------------------------------------------------------------


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception reachable through ``__cause__`` and ``__context__``."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def assert_clean(exc: BaseException, *secrets: str) -> None:
    """A cpcreds error, one line, with no secret anywhere in its chain."""
    assert isinstance(exc, CredentialError), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc)
    for linked in chain(exc):
        for text in (str(linked), repr(linked.args)):
            for secret in (SECRET, *secrets):
                assert secret not in text, f"{secret!r} leaked via {type(linked).__name__}: {text[:200]}"


def assert_clean_chain(exc: BaseException) -> None:
    """A one-line cpcreds error; the marker only in our own message (it is a name), not beyond."""
    assert isinstance(exc, CredentialError) and "\n" not in str(exc)
    for linked in list(chain(exc))[1:]:
        assert SECRET not in str(linked)


def outcome(call: Any, *args: Any, names_may_show: bool = False, **kwargs: Any) -> Any:
    """Run ``call``; any non-cpcreds exception fails the test; cpcreds errors are checked.

    ``names_may_show``: the marker may sit where a name goes (a profile or provider name), which
    messages rightly show; then only the error's type, shape and chain are checked."""
    started = time.perf_counter()
    try:
        result = call(*args, **kwargs)
    except CredentialError as exc:
        result = exc
        if names_may_show:
            assert_clean_chain(exc)
        else:
            assert_clean(exc)
    assert time.perf_counter() - started < TIME_LIMIT
    return result


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path


def with_extension(name: str, value: Any, **policies: str) -> tuple[ProviderConfig, dict[str, Any]]:
    config = config_of(exec_entry("p", **policies))
    profile = cluster_profile("c", access_provider("p"))
    profile["status"]["accessProviders"][0]["cluster"]["extensions"] = [{"name": name, "extension": value}]
    return config, profile


# -- strategies ----------------------------------------------------------------------------------


def huge_int() -> int:
    """An integer whose decimal form CPython refuses to build (built lazily: repr() fails on it)."""
    return 10 ** (MAX_INT_DIGITS + 5)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.just(SECRET),
    st.just("2024-01-01"),
    st.dates(),
    st.binary(max_size=10),
    st.builds(huge_int),
    st.just("\ud800"),
    st.just("a\x00b"),
)
keys = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.none(), st.dates(), st.sampled_from(["name", "uid", "accessProviders", "extensions", "cluster", "server"]))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner),
        st.dictionaries(keys, inner, max_size=4),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=20,
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=25,
)
yaml_fragments = st.lists(
    st.sampled_from(
        ["providers:", "\n", "- ", "  ", "\t", "name: a", "execConfig:", "{", "}", "[", "]", ",", ": ", "&a ", "*a", "<<: ",
         "!!set ", "!!python/object:os.system ", "? ", "---\n", "'", '"', "\\", "1" * 5000, "2024-01-01", "\x00", "#",
         "type: file", "options: ", "timeout: 1s", "apiVersion: client.authentication.k8s.io/v1", "command: x", SECRET]
    ),
    max_size=40,
).map("".join)  # fmt: skip


# -- property suite ------------------------------------------------------------------------------


@PROPERTY
@given(text=st.one_of(st.text(max_size=300), yaml_fragments, st.binary(max_size=300)))
def test_any_config_text_gives_a_config_or_a_clean_config_error(tmp_path_factory: pytest.TempPathFactory, text: str | bytes) -> None:
    path = write(tmp_path_factory.mktemp("cfg"), "providers.yaml", text)
    # The marker may land where a key or a name goes; those are shown, values are not.
    result = outcome(load_config, path, names_may_show=True)
    assert isinstance(result, (ProviderConfig, CredentialError))


@PROPERTY
@given(value=json_values, as_json=st.booleans())
def test_any_config_file_structure_gives_a_config_or_a_clean_config_error(tmp_path_factory: pytest.TempPathFactory, value: Any, as_json: bool) -> None:
    document = {"providers": value if isinstance(value, list) else [value]}
    text = json.dumps(document) if as_json else yaml.safe_dump(document)
    path = write(tmp_path_factory.mktemp("cfg"), "providers.json" if as_json else "providers.yaml", text)
    outcome(load_config, path, names_may_show=True)


@PROPERTY
@given(documents=st.lists(json_values, max_size=3))
def test_any_profile_file_structure_gives_profiles_or_a_clean_profile_error(tmp_path_factory: pytest.TempPathFactory, documents: list[Any]) -> None:
    path = write(tmp_path_factory.mktemp("prof"), "profiles.yaml", yaml.safe_dump_all(documents))
    result = outcome(load_profiles, path, names_may_show=True)
    if isinstance(result, list):
        for profile in result:
            outcome(resolve, config_of(exec_entry("a")), profile, names_may_show=True)


@PROPERTY
@given(data=values)
def test_any_config_structure_gives_a_config_or_a_clean_config_error(data: Any) -> None:
    outcome(ProviderConfig.from_dict, data, names_may_show=True)
    outcome(ProviderConfig.from_dict, {"providers": [data]}, names_may_show=True)  # data may hold a name
    outcome(ProviderConfig.from_dict, {"providers": [{"name": "a", "execConfig": data}]}, names_may_show=True)
    if isinstance(data, dict):
        entry = {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x", "args": [SECRET], "env": [{"name": "E", "value": SECRET}]}}
        outcome(ProviderConfig.from_dict, {"providers": [{**entry, **{k: v for k, v in data.items() if k != "name"}}]})


@PROPERTY
@given(field=st.sampled_from(["args", "env", "command", "apiVersion", "interactiveMode", "provideClusterInfo", "installHint"]), value=values)
def test_any_exec_config_field_value_gives_a_clean_config_error(field: str, value: Any) -> None:
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/x", "args": [f"--password={SECRET}"],
                   "env": [{"name": "TOKEN", "value": SECRET}], field: value}  # fmt: skip
    shown = field in ("apiVersion", "interactiveMode")  # a wrong version or mode is shown; it is no secret
    result = outcome(ProviderConfig.from_dict, {"providers": [{"name": "a", "execConfig": exec_config}]}, names_may_show=shown)
    if isinstance(result, ProviderConfig):
        outcome(resolve, result, cluster_profile("c", access_provider("a")))


@PROPERTY
@given(field=st.sampled_from(["name", "type", "options", "timeout", "profileSourcedCLIArgsPolicy", "colour"]), value=values)
def test_any_entry_field_value_gives_a_clean_config_error(field: str, value: Any) -> None:
    entry = {"name": "a", "type": "file", "options": {"tokenFile": "/t", "x": SECRET}, field: value}
    # A name, a type, a policy or a timeout is shown when it is wrong; none of them is a secret.
    result = outcome(ProviderConfig.from_dict, {"providers": [entry]}, source="p.yaml", names_may_show=field != "options")
    if isinstance(result, ProviderConfig):
        outcome(resolve, result, cluster_profile("c", access_provider(result.providers[0].name)))


PROFILE_PLACES = ["metadata", "metadata.name", "metadata.uid", "metadata.resourceVersion", "metadata.generation", "status",
                  "status.accessProviders", "provider", "provider.name", "cluster", "cluster.server", "cluster.extensions",
                  "cluster.certificate-authority-data", "cluster.insecure-skip-tls-verify", "spec", "kind"]  # fmt: skip


def _put(profile: dict[str, Any], place: str, value: Any) -> None:
    provider = profile["status"]["accessProviders"][0]
    holders = {"provider": (profile["status"]["accessProviders"], 0), "cluster": (provider, "cluster")}
    head, _, tail = place.partition(".")
    if head in holders and not tail:
        container, key = holders[head]
        container[key] = value
        return
    target = provider if head == "provider" else provider["cluster"] if head == "cluster" else profile
    if tail:
        target = target if head in ("provider", "cluster") else target.setdefault(head, {})
        target[tail] = value
    else:
        target[head] = value


@PROPERTY
@given(place=st.sampled_from(PROFILE_PLACES), value=values)
def test_any_profile_data_gives_a_plan_or_a_clean_profile_error(place: str, value: Any) -> None:
    config = config_of(exec_entry("p", env=[{"name": "T", "value": SECRET}], profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="Replace"))
    profile = cluster_profile("c", access_provider("p", exec_extension={"k": SECRET}, additional_args=[SECRET], additional_envs={"X": SECRET}))
    _put(profile, place, value)
    names_may_show = place.split(".")[0] in ("metadata", "status", "provider", "kind")
    outcome(parse_profile, profile, names_may_show=names_may_show)
    outcome(resolve, config, profile, names_may_show=names_may_show)


@PROPERTY
@given(name=st.sampled_from([EXEC_EXTENSION, ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION]), value=values)
def test_any_reserved_extension_value_gives_a_plan_or_a_clean_profile_error(name: str, value: Any) -> None:
    config, profile = with_extension(name, value, profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="AppendIfNotExists")
    plan = outcome(resolve, config, profile)
    if not isinstance(plan, CredentialError):
        shown = json.dumps(plan.to_dict())  # what `cpcreds resolve` prints
        if name == ADDITIONAL_ENVS_EXTENSION:  # env values are always masked
            assert SECRET not in repr(plan) and SECRET not in shown
        assert plan.key == resolve(config, profile).key


@PROPERTY
@given(text=st.one_of(st.text(max_size=300), yaml_fragments, st.binary(max_size=300)))
def test_any_profile_file_gives_profiles_or_a_clean_profile_error(tmp_path_factory: pytest.TempPathFactory, text: str | bytes) -> None:
    path = write(tmp_path_factory.mktemp("prof"), "profiles.yaml", text)
    result = outcome(load_profiles, path, names_may_show=True)
    if isinstance(result, list):
        for profile in result:
            outcome(resolve, config_of(exec_entry("a")), profile, names_may_show=True)


@PROPERTY
@given(data=st.one_of(st.text(max_size=300), yaml_fragments, st.binary(max_size=300)))
def test_any_answer_text_gives_plain_data_or_a_document_error(data: str | bytes) -> None:
    started = time.perf_counter()
    try:
        documents = load_documents(data, source="answer")
    except DocumentError as exc:
        for linked in chain(exc):
            assert SECRET not in str(linked)
        assert exc.__context__ is None and exc.__cause__ is None
    else:
        json.dumps(documents)  # plain JSON data: str keys, finite numbers, no dates, no sets
    assert time.perf_counter() - started < TIME_LIMIT


@PROPERTY
@given(value=json_values)
def test_json_and_yaml_written_by_python_read_back_the_same(value: Any) -> None:
    assert load_document(json.dumps(value), source="x", syntax="json") == value
    assert load_document(yaml.safe_dump(value), source="x") == value


# -- sizes, depth, aliases -----------------------------------------------------------------------


def bounded(call: Any, *args: Any, seconds: float = 5.0, megabytes: float = 20.0) -> BaseException:
    # The bound tells a refusal at the limit from reading on (what an unbounded reader of these
    # inputs does takes minutes or runs out of memory); tracemalloc slows the call several times,
    # and a loaded machine more, so it is loose: the memory bound is the sharp one.
    tracemalloc.start()
    started = time.perf_counter()
    try:
        call(*args)
    except BaseException as exc:  # noqa: BLE001 - the test checks what it is
        error = exc
    else:
        raise AssertionError("no error")
    finally:
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < seconds, elapsed
    assert peak < megabytes * 1e6, peak
    return error


@pytest.mark.parametrize("text", ["[" * 25_000, "a: " + "[" * 25_000, "- " * 25_000 + "x", '{"a":' * 25_000, "{" * 25_000])
def test_deep_nesting_in_a_config_file_is_a_clean_error_not_a_crash(tmp_path: Path, text: str) -> None:
    error = bounded(load_config, write(tmp_path, "deep.yaml", text))
    assert_clean(error)
    assert "nested more than" in str(error)


@given(depth=st.integers(1, 1500), limit=st.integers(2, 120), prefix=st.sampled_from(["", "a: ", "- "]), closed=st.booleans())
@settings(max_examples=60, deadline=None)
def test_depth_is_decided_by_our_limit_whatever_the_yaml_parser_allows(depth: int, limit: int, prefix: str, closed: bool) -> None:
    # Flow nesting past libyaml's own limit (1000) is refused in our words, as is any nesting past
    # ours; nothing depends on the parser's limit or wording.
    levels = depth + (prefix != "")
    text = prefix + "[" * depth + ("]" * depth if closed else "")
    try:
        load_document(text, source="d", max_depth=limit, syntax="yaml")
    except DocumentError as exc:
        assert exc.kind == ("too-deep" if levels > limit else "syntax")
        if exc.kind == "too-deep":
            assert str(exc).startswith(f"d: is nested more than {limit} levels deep")
    else:
        assert closed and levels <= limit


def test_brackets_in_quoted_scalars_and_comments_are_not_depth() -> None:
    text = "a: '" + "[" * 3000 + "'\nb: \"" + "{" * 3000 + "\"  # " + "[" * 3000 + "\nc: [1]\n"
    assert load_document(text, source="q", max_depth=10) == {"a": "[" * 3000, "b": "{" * 3000, "c": [1]}


@pytest.mark.parametrize("text", ["[" * 25_000, "- " * 25_000 + "x", '{"items": ' + "[" * 25_000])
def test_deep_nesting_in_a_profile_file_is_a_clean_error_not_a_crash(tmp_path: Path, text: str) -> None:
    error = bounded(load_profiles, write(tmp_path, "deep.yaml", text))
    assert_clean(error)
    assert "nested more than 100 levels deep" in str(error)


def test_deep_json_in_a_json_config_is_a_clean_error(tmp_path: Path) -> None:
    error = bounded(load_config, write(tmp_path, "deep.json", '{"providers": ' + "[" * 100_000 + "]" * 100_000 + "}"))
    assert str(error) == f"{tmp_path / 'deep.json'}: is nested more than 64 levels deep"


def test_billion_laughs_fails_fast_and_small_in_every_loader(tmp_path: Path) -> None:
    assert len(BILLION_LAUGHS) < 700
    for call in (load_config, load_profiles):
        error = bounded(call, write(tmp_path, "lol.yaml", BILLION_LAUGHS), megabytes=5)
        assert_clean(error)
        assert "aliases" in str(error)
    error = bounded(lambda text: load_document(text, source="lol"), BILLION_LAUGHS, megabytes=5)
    assert isinstance(error, DocumentError) and error.kind == "aliases"


def test_a_small_profile_file_cannot_expand_past_the_size_limit_through_aliases(tmp_path: Path) -> None:
    # One 20 KB string aliased 1,000 times: 25 KB of file, 20 MB once written out (a folder
    # profile is held packed as its JSON text, with every alias written out). Refused as the
    # aliases are read, before anything is built that large (issue 28, item 13).
    text = "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {name: big}\n"
    text += "status:\n  big: &x " + "a" * 20_000 + "\n  copies:\n" + "    - *x\n" * 1000
    assert len(text) < 40_000
    error = bounded(load_profiles, write(tmp_path, "big.yaml", text), megabytes=30)
    assert_clean(error)
    assert "expands to more than 16 MiB (through aliases)" in str(error)
    # Aliases that stay within the bound are read as before.
    fine = text.replace("a" * 20_000, "a" * 100)
    assert len(json.dumps(load_profiles(write(tmp_path, "fine.yaml", fine))[0])) > 100_000


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(DocumentError, match="alias refers to a node that contains it"):
        load_document("a: &x [1, *x]", source="x")


def test_config_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    path = write(tmp_path, "big.yaml", "#" * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(CredentialError, match=r"big\.yaml: is larger than 1 MiB$"):
        load_config(path)


def test_config_from_dev_zero_fails_fast(tmp_path: Path) -> None:
    error = bounded(load_config, "/dev/zero", megabytes=10)
    assert str(error) == "/dev/zero: is not a regular file"


# -- keys, tabs, numbers, tags ------------------------------------------------------------------


def test_duplicate_key_in_yaml_config_names_key_and_line(tmp_path: Path) -> None:
    text = "providers:\n- name: a\n  type: file\n  name: b\n"
    with pytest.raises(CredentialError) as info:
        load_config(write(tmp_path, "dup.yaml", text))
    assert str(info.value) == f"{tmp_path / 'dup.yaml'}: duplicate key 'name' (first at line 2) at line 4"


def test_duplicate_key_in_json_config_names_key_and_line(tmp_path: Path) -> None:
    text = '{"providers": [\n {"name": "a",\n  "type": "file",\n  "name": "b"}]}'
    with pytest.raises(CredentialError) as info:
        load_config(write(tmp_path, "dup.json", text))
    assert str(info.value) == f"{tmp_path / 'dup.json'}: duplicate key 'name' at line 4"


def test_duplicate_key_in_profile_file_names_key_and_line(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match=r"duplicate key 'metadata' \(first at line 1\) at line 3"):
        load_profiles(write(tmp_path, "p.yaml", "metadata: {name: a}\nkind: ClusterProfile\nmetadata: {name: b}\n"))


def test_tab_indentation_is_named_in_the_message(tmp_path: Path) -> None:
    with pytest.raises(CredentialError) as info:
        load_config(write(tmp_path, "tab.yaml", "providers:\n- name: a\n\ttype: file\n"))
    assert str(info.value) == (
        f"{tmp_path / 'tab.yaml'}: not valid YAML: a tab character is used for indentation "
        "(YAML indents with spaces only) at line 3"
    )


@pytest.mark.parametrize("number", ["5" * 5000, "-" + "5" * 5000])
def test_integers_over_4300_digits_are_a_clean_error(tmp_path: Path, number: str) -> None:
    for name, text in (("big.yaml", f"providers: {number}\n"), ("big.json", f'{{"providers": {number}}}')):
        with pytest.raises(CredentialError, match=f"an integer has more than {MAX_INT_DIGITS} digits"):
            load_config(write(tmp_path, name, text))
    with pytest.raises(CredentialError, match=f"more than {MAX_INT_DIGITS} digits"):
        resolve(*with_extension(EXEC_EXTENSION, {"n": int(number[:4000]) ** 2}))


def test_timestamps_and_base60_stay_strings_and_keys_are_strings() -> None:
    document = load_document("since: 2024-01-01\nat: 2024-01-01T10:00:00Z\nport: 22:22\n1: one\ntrue: yes\n", source="x")
    assert document == {"since": "2024-01-01", "at": "2024-01-01T10:00:00Z", "port": "22:22", "1": "one", "true": True}


@pytest.mark.parametrize("text", ["!!set {a, b}", "x: !!python/object/apply:os.system [echo]", "!!omap [a: 1]", "x: !custom 1"])
def test_tags_that_build_objects_are_refused(text: str) -> None:
    with pytest.raises(DocumentError, match="is not supported"):
        load_document(text, source="x")


def test_mapping_used_as_a_key_is_refused() -> None:
    with pytest.raises(DocumentError, match="a mapping key must be a string"):
        load_document("? [1, 2]\n: x\n", source="x")


def test_mixed_key_types_from_python_are_a_config_error() -> None:
    with pytest.raises(CredentialError, match=r"unknown top-level field\(s\)"):
        ProviderConfig.from_dict({"providers": [], 1: "x", datetime.date(2024, 1, 1): "y"})


@pytest.mark.parametrize("extension", [{"since": datetime.date(2024, 1, 1)}, {1: "x"}, {"s": {1, 2}}, {"f": float("nan")}, {"b": b"x"}])
def test_exec_extension_that_json_cannot_hold_is_a_profile_error(extension: dict) -> None:
    with pytest.raises(CredentialError) as info:
        resolve(*with_extension(EXEC_EXTENSION, extension))
    assert str(info.value).startswith("ClusterProfile fleet-system/c: status.accessProviders[name=p].cluster.extensions[client.authentication.k8s.io/exec]: ")


def test_self_referencing_exec_extension_is_a_profile_error() -> None:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    with pytest.raises(CredentialError, match="nested more than 100 levels deep"):
        resolve(*with_extension(EXEC_EXTENSION, loop))


@pytest.mark.parametrize(
    ("metadata", "field"),
    [("just-a-string", "metadata"), ({"uid": ["a"], "resourceVersion": "1"}, "metadata.uid"), ({"uid": "u", "resourceVersion": {"a": 1}}, "metadata.resourceVersion"), ({"generation": [1]}, "metadata.generation")],
)
def test_non_scalar_metadata_is_a_profile_error(metadata: Any, field: str) -> None:
    profile = cluster_profile("c", access_provider("p"))
    profile["metadata"] = metadata
    with pytest.raises(CredentialError) as info:
        resolve(config_of(exec_entry("p")), profile)
    assert f"field {field}: must be" in str(info.value)


def test_plain_copy_refuses_what_json_cannot_hold_without_quoting_it() -> None:
    with pytest.raises(ValueError) as info:
        plain_copy({"a": [{"when": datetime.datetime(2024, 1, 1)}], "k": SECRET})
    assert str(info.value) == "a[0].when is a datetime, which JSON cannot hold"


# -- values that cannot reach a process --------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("args", ["ok", f"{SECRET}\x00"], "field execConfig.args: item 1 contains a NUL character"),
        ("args", [f"{SECRET}\ud800"], "field execConfig.args: item 0 contains a lone surrogate"),
        ("env", [{"name": "A", "value": f"{SECRET}\x00"}], "field execConfig.env[0].value: contains a NUL character"),
        ("env", [{"name": "A\ud800", "value": SECRET}], "field execConfig.env[0].name: contains a lone surrogate"),
        ("env", [{"name": "A=B", "value": SECRET}], "field execConfig.env[0].name: must not contain '='"),
        ("command", "/bin/x\x00y", "field execConfig.command: contains a NUL character"),
    ],
)
def test_configured_values_a_process_cannot_take_fail_at_load(field: str, value: Any, message: str) -> None:
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/x", field: value}
    with pytest.raises(CredentialError) as info:
        ProviderConfig.from_dict({"providers": [{"name": "p", "execConfig": exec_config}]}, source="p.yaml")
    assert str(info.value).startswith(f'p.yaml: provider "p" (providers[0]): {message}')
    assert_clean(info.value)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (ADDITIONAL_ARGS_EXTENSION, ["ok", f"{SECRET}\x00"], "additional-args][1] contains a NUL character"),
        (ADDITIONAL_ARGS_EXTENSION, [f"{SECRET}\ud800"], "additional-args][0] contains a lone surrogate"),
        (ADDITIONAL_ENVS_EXTENSION, {"A": f"{SECRET}\x00"}, "additional-envs]: the value of A contains a NUL character"),
        (ADDITIONAL_ENVS_EXTENSION, {"A\ud800": SECRET}, "additional-envs]: variable (a name that is not shown) is not a portable variable name"),
        (ADDITIONAL_ENVS_EXTENSION, {"A=B": SECRET}, "additional-envs]: variable 'A=B' is not a portable variable name"),
        (ADDITIONAL_ENVS_EXTENSION, {"": SECRET}, "additional-envs]: a variable name is empty"),
        (ADDITIONAL_ENVS_EXTENSION, {"1ABC": SECRET}, "additional-envs]: variable '1ABC' is not a portable variable name"),
        (ADDITIONAL_ENVS_EXTENSION, {"A-B": SECRET}, "additional-envs]: variable 'A-B' is not a portable variable name"),
    ],
)
def test_profile_values_a_process_cannot_take_fail_in_resolve(name: str, value: Any, message: str) -> None:
    config, profile = with_extension(name, value, profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="Replace")
    with pytest.raises(CredentialError) as info:
        resolve(config, profile)
    assert str(info.value).startswith("ClusterProfile fleet-system/c: status.accessProviders[name=p].cluster.extensions[")
    assert message in str(info.value)
    assert_clean(info.value)


def test_error_for_a_secret_in_a_pydantic_checked_field_names_the_type_not_the_value() -> None:
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/x", "env": [{"name": "T", "value": [SECRET]}], "args": {SECRET: 1}}
    with pytest.raises(CredentialError) as info:
        ProviderConfig.from_dict({"providers": [{"name": "p", "execConfig": exec_config}]})
    assert "field execConfig.args: must be a list, not a mapping" in str(info.value)
    assert "field execConfig.env[0].value: must be a string, not a list" in str(info.value)
    assert_clean(info.value)


def test_a_python_exception_never_hangs_off_our_errors(tmp_path: Path) -> None:
    cases = [
        lambda: load_config(tmp_path / "missing.yaml"),
        lambda: load_config(tmp_path),
        lambda: load_config(write(tmp_path, "bad.json", '{"token": "' + SECRET + '", }')),
        lambda: load_config(write(tmp_path, "bad.yaml", f"a: [{SECRET}\n")),
        lambda: load_config(write(tmp_path, "latin1.yaml", b"a: \xff" + SECRET.encode())),
        lambda: load_profiles(write(tmp_path, "p.yaml", f'"{SECRET}\\x": 1')),
        lambda: ProviderConfig.from_dict({"providers": [{"name": "p", "execConfig": {"apiVersion": 1, "command": SECRET, "env": [{"value": SECRET}]}}]}),
        lambda: parse_profile({"metadata": {"name": ["x"]}, "status": {"accessProviders": [{"name": SECRET, "cluster": {"certificate-authority-data": SECRET}}]}}),
    ]
    for case in cases:
        with pytest.raises(CredentialError) as info:
            case()
        assert info.value.__context__ is None and info.value.__cause__ is None, (str(info.value), repr(info.value.__context__))
        assert_clean(info.value)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX FIFOs")
def test_profile_file_that_is_a_directory_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match="is a directory"):
        load_profiles(tmp_path)
