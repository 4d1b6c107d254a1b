"""KEP-2133 wire protocol (cpcreds.images.protocol): requests, responses, Go durations.

Table-driven examples of what the kubelet writes and accepts, and hypothesis for the parsers:
any input gives a value or a ProtocolError, never another exception, never a secret in a message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import CredentialError
from cpcreds.sdk import parse_duration  # the one Go-duration parser (a ValueError)
from cpcreds.images.protocol import (
    API_VERSION_V1,
    API_VERSION_V1ALPHA1,
    API_VERSION_V1BETA1,
    CACHE_KEY_TYPES,
    SUPPORTED_API_VERSIONS,
    AuthConfig,
    CredentialProviderResponse,
    ProtocolError,
    encode_request,
    encode_response,
    format_duration,
    parse_request,
    parse_response,
)

SECRET = "hunter2-Secret-Value"


def response_bytes(api_version: str = API_VERSION_V1, **fields: Any) -> bytes:
    document = {"apiVersion": api_version, "kind": "CredentialProviderResponse", **fields}
    return json.dumps(document).encode()


# -- durations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("-0", 0.0),
        ("1h0m0s", 3600.0),
        ("90s", 90.0),
        ("1.5h", 5400.0),
        ("1h30m", 5400.0),
        ("-1m", -60.0),
        ("+5s", 5.0),
        ("1.s", 1.0),
        (".5s", 0.5),
        ("2ms", 0.002),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        ("1\u03bcs", 1e-6),
        ("3ns", 3e-9),
        ("1h1h", 7200.0),
        ("2562047h47m16.854775807s", 9223372036.854775807),
    ],
)
def test_go_durations_parse_as_time_ParseDuration_does(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-15, abs=1e-12)


@pytest.mark.parametrize(
    "text",
    ["", "1", "s", ".s", "1x", "1 s", " 1s", "--1s", "1h-1m", "-", "1e3s", "2562047h47m16.854775808s", "9" * 80 + "h", "1d"],
)
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (3600, "1h0m0s"),
        (3599, "59m59s"),
        (90061.5, "25h1m1.5s"),
        (1.5, "1.5s"),
        (0.0015, "1.5ms"),
        (0.002, "2ms"),
        (1.5e-6, "1.5\u00b5s"),
        (1e-9, "1ns"),
        (-60, "-1m0s"),
    ],
)
def test_durations_format_as_go_Duration_String_does(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_format_then_parse_is_the_same_duration(nanoseconds: int) -> None:
    seconds = nanoseconds / 1e9
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, rel=1e-12, abs=1e-9)


@given(st.text(max_size=40))
def test_parse_duration_of_any_text_is_a_number_or_a_value_error(text: str) -> None:
    try:
        value = parse_duration(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(value, float)


# -- requests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
def test_a_request_round_trips_in_every_api_version(api_version: str) -> None:
    data = encode_request("registry.io:5000/team/app@sha256:" + "a" * 64, api_version)
    document = json.loads(data)
    assert document == {"apiVersion": api_version, "kind": "CredentialProviderRequest", "image": "registry.io:5000/team/app@sha256:" + "a" * 64}
    request = parse_request(data)
    assert (request.image, request.api_version, request.service_account_token) == (document["image"], api_version, None)


def test_a_v1_request_carries_the_service_account_token_and_annotations() -> None:
    data = encode_request("gcr.io/p/app", service_account_token=SECRET, service_account_annotations={"iam.gke.io/gcp-service-account": "sa@p"})
    assert json.loads(data)["serviceAccountToken"] == SECRET
    request = parse_request(data)
    assert request.service_account_token == SECRET
    assert dict(request.service_account_annotations) == {"iam.gke.io/gcp-service-account": "sa@p"}
    assert SECRET not in repr(request) and SECRET not in str(request)


@pytest.mark.parametrize("api_version", [API_VERSION_V1BETA1, API_VERSION_V1ALPHA1])
def test_a_service_account_token_is_only_sent_in_v1(api_version: str) -> None:
    with pytest.raises(ValueError, match="only sent in"):
        encode_request("gcr.io/p/app", api_version, service_account_token=SECRET)


def test_older_versions_ignore_token_fields_they_do_not_define() -> None:
    data = json.dumps({"apiVersion": API_VERSION_V1BETA1, "kind": "CredentialProviderRequest", "image": "x.io/a", "serviceAccountToken": 5})
    assert parse_request(data).service_account_token is None


def test_unknown_request_fields_are_ignored_for_newer_kubelets() -> None:
    data = json.dumps({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": "x.io/a", "somethingNew": {"a": 1}})
    assert parse_request(data).image == "x.io/a"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"apiVersion": API_VERSION_V1, "kind": "ExecCredential", "image": "x.io/a"}, "kind"),
        ({"apiVersion": "credentialprovider.kubelet.k8s.io/v2", "kind": "CredentialProviderRequest", "image": "x.io/a"}, "apiVersion"),
        ({"apiVersion": 1, "kind": "CredentialProviderRequest", "image": "x.io/a"}, "apiVersion"),
        ({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest"}, "image"),
        ({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": ""}, "image"),
        ({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": ["x"]}, "image"),
        ({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": "x", "serviceAccountToken": {"t": SECRET}}, "serviceAccountToken"),
        ({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": "x", "serviceAccountAnnotations": {"a": 1}}, "serviceAccountAnnotations"),
        ({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": "x", "serviceAccountAnnotations": [SECRET]}, "serviceAccountAnnotations"),
    ],
)
def test_a_bad_request_names_the_field(document: dict[str, Any], field: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_request(json.dumps(document))
    assert caught.value.field == field and field in str(caught.value)
    assert isinstance(caught.value, CredentialError) and SECRET not in str(caught.value)


@pytest.mark.parametrize("data", [b"", b"null", b"[]", b"\xff\xfe", b"{", b"image: x", b"[" * 5000 + b"]" * 5000, b"{}" + b" " * (2 * 1024 * 1024)])
def test_a_request_that_is_not_a_json_object_is_refused(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="^CredentialProviderRequest") as caught:
        parse_request(data)
    assert caught.value.__cause__ is None and caught.value.__context__ is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=12,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(SUPPORTED_API_VERSIONS) | json_values,
        "kind": st.just("CredentialProviderRequest") | json_values,
        "image": st.text(max_size=60) | json_values,
        "serviceAccountToken": st.just(SECRET) | json_values,
        "serviceAccountAnnotations": st.dictionaries(st.text(max_size=10), st.text(max_size=10) | json_values, max_size=3) | json_values,
    },
)


@settings(max_examples=300)
@given(request_like)
def test_any_request_document_is_a_request_or_a_protocol_error(document: dict[str, Any]) -> None:
    try:
        request = parse_request(json.dumps(document))
    except ProtocolError as exc:
        assert "\n" not in str(exc) and SECRET not in str(exc)
    else:
        assert request.image == document["image"] and request.api_version == document["apiVersion"]
        assert parse_request(encode_request(request.image, request.api_version, service_account_token=request.service_account_token, service_account_annotations=request.service_account_annotations)) == request


@given(st.binary(max_size=200))
def test_any_bytes_are_a_request_or_a_protocol_error(data: bytes) -> None:
    try:
        parse_request(data)
    except ProtocolError as exc:
        assert "\n" not in str(exc)


# -- responses --------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
@pytest.mark.parametrize("cache_key_type", CACHE_KEY_TYPES)
def test_a_response_round_trips_in_every_api_version_and_cache_key_type(api_version: str, cache_key_type: str) -> None:
    response = CredentialProviderResponse(
        cache_key_type,
        {"*.gcr.io": AuthConfig("oauth2accesstoken", SECRET), "gcr.io": AuthConfig("oauth2accesstoken", SECRET)},
        cache_duration=3599.5,
    )
    data = encode_response(response, api_version)
    document = json.loads(data)
    assert document["apiVersion"] == api_version and document["kind"] == "CredentialProviderResponse"
    assert document["cacheDuration"] == "59m59.5s"
    assert list(document["auth"]) == ["*.gcr.io", "gcr.io"]
    assert parse_response(data, api_version) == response


def test_a_response_without_duration_or_auth_omits_them_as_go_does() -> None:
    data = encode_response(CredentialProviderResponse("Global"), API_VERSION_V1)
    assert json.loads(data) == {"apiVersion": API_VERSION_V1, "kind": "CredentialProviderResponse", "cacheKeyType": "Global"}
    parsed = parse_response(data, API_VERSION_V1)
    assert parsed.cache_duration is None and dict(parsed.auth) == {}


def test_missing_or_null_auth_strings_are_empty_as_go_decodes_them() -> None:
    data = response_bytes(cacheKeyType="Image", cacheDuration=None, auth={"a.io": {"username": "u"}, "b.io": None, "c.io": {"password": None}})
    parsed = parse_response(data, API_VERSION_V1)
    assert dict(parsed.auth) == {"a.io": AuthConfig("u", ""), "b.io": AuthConfig(), "c.io": AuthConfig()}


def test_the_response_must_use_the_requests_api_version() -> None:
    data = response_bytes(API_VERSION_V1BETA1, cacheKeyType="Registry")
    with pytest.raises(ProtocolError, match="does not match the request's credentialprovider.kubelet.k8s.io/v1$") as caught:
        parse_response(data, API_VERSION_V1)
    assert caught.value.field == "apiVersion"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "CredentialProviderRequest", "cacheKeyType": "Image"}, "kind"),
        ({"cacheKeyType": "image"}, "cacheKeyType"),
        ({}, "cacheKeyType"),
        ({"cacheKeyType": SECRET}, "cacheKeyType"),
        ({"cacheKeyType": "Image", "cacheDuration": 60}, "cacheDuration"),
        ({"cacheKeyType": "Image", "cacheDuration": SECRET}, "cacheDuration"),
        ({"cacheKeyType": "Image", "cacheDuration": "1d"}, "cacheDuration"),
        ({"cacheKeyType": "Image", "auth": [SECRET]}, "auth"),
        ({"cacheKeyType": "Image", "auth": {"x.io": SECRET}}, "auth"),
        ({"cacheKeyType": "Image", "auth": {"x.io": {"username": "u", "password": 12345}}}, "auth"),
        ({"cacheKeyType": "Image", "auth": {"x.io": {"username": ["u"], "password": SECRET}}}, "auth"),
        ({"cacheKeyType": "Image", "auth": {SECRET + " \n": {"password": [SECRET]}}}, "auth"),
    ],
)
def test_a_response_the_kubelet_would_not_use_is_refused_naming_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_response(response_bytes(**fields), API_VERSION_V1)
    message = str(caught.value)
    assert caught.value.field == field and field in message
    assert SECRET not in message and "12345" not in message and "\n" not in message


def test_auth_config_never_shows_its_password() -> None:
    auth = AuthConfig("oauth2accesstoken", SECRET)
    response = CredentialProviderResponse("Registry", {"gcr.io": auth}, 60)
    for text in (repr(auth), str(auth), repr(response), str(response), f"{auth}", f"{response!r}"):
        assert SECRET not in text
    assert "oauth2accesstoken" in repr(auth)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("Session",), ValueError),
        (("Image", {"x.io": ("u", "p")}), TypeError),
        (("Image", {1: AuthConfig()}), TypeError),
        (("Image", {}, float("inf")), ValueError),
        (("Image", {}, "60"), ValueError),
    ],
)
def test_a_response_object_validates_what_it_is_built_from(args: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        CredentialProviderResponse(*args)


response_like = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(SUPPORTED_API_VERSIONS) | json_values,
        "kind": st.just("CredentialProviderResponse") | json_values,
        "cacheKeyType": st.sampled_from(CACHE_KEY_TYPES) | json_values,
        "cacheDuration": st.sampled_from(["1h0m0s", "0", "-1s", "1.5h"]) | st.text(max_size=12) | json_values,
        "auth": st.dictionaries(
            st.text(max_size=20),
            st.none() | st.fixed_dictionaries({}, optional={"username": st.text(max_size=8) | json_values, "password": st.just(SECRET) | json_values}),
            max_size=4,
        )
        | json_values,
    },
)


@settings(max_examples=400)
@given(response_like, st.sampled_from(SUPPORTED_API_VERSIONS))
def test_any_response_document_is_a_response_or_a_protocol_error(document: dict[str, Any], expected: str) -> None:
    try:
        response = parse_response(json.dumps(document), expected)
    except ProtocolError as exc:
        assert "\n" not in str(exc) and SECRET not in str(exc)
        assert exc.__cause__ is None and exc.__context__ is None
    else:
        assert document["apiVersion"] == expected and response.cache_key_type == document["cacheKeyType"]
        assert parse_response(encode_response(response, expected), expected) == response
        assert SECRET not in repr(response)


@given(st.binary(max_size=200))
def test_any_bytes_are_a_response_or_a_protocol_error(data: bytes) -> None:
    try:
        parse_response(data, API_VERSION_V1)
    except ProtocolError as exc:
        assert "\n" not in str(exc)
