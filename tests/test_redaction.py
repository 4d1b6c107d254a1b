"""redact_text: the secrets plugins and libraries commonly print on stderr never survive it, and
the words around them stay readable.

The table has one row per format; the property tests put random secrets into every format.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cpcreds.logs import REDACTED, redact_text

R = REDACTED


def _rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode("ascii")


def _ec_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


RSA_PEM = _rsa_pem()
EC_PEM = _ec_pem()
RSA_BODY = RSA_PEM.strip().splitlines()[1:-1]  # 64-character base64 lines, the last one shorter


def one_line(text: str) -> str:
    """What the exec runner does to a plugin's stderr: one line, whitespace collapsed."""
    return " ".join(text.split())


# (id, text, expected) -- one row per common stderr format.
FORMATS: list[tuple[str, str, str]] = [
    ("vault-token-env", "VAULT_TOKEN=hvs.CAESIJ8xYz vault: permission denied", f"VAULT_TOKEN={R} vault: permission denied"),
    (
        "aws-secret-key-env",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws: error",
        f"AWS_SECRET_ACCESS_KEY={R} aws: error",
    ),
    ("aws-session-token-env", "export AWS_SESSION_TOKEN=FwoGZXIvYXdzEJr//////////wEaDM", f"export AWS_SESSION_TOKEN={R}"),
    ("generic-token-env", "GITLAB_CI_TOKEN=glpat-123abc", f"GITLAB_CI_TOKEN={R}"),
    ("generic-secret-env", "MY_APP_SECRET=s3cr3t!x", f"MY_APP_SECRET={R}"),
    ("generic-password-env-quoted", "DB_PASSWORD='p a s s' connecting", f"DB_PASSWORD='{R}' connecting"),
    ("generic-key-env", "STRIPE_KEY=sk_live_abc123 loaded", f"STRIPE_KEY={R} loaded"),
    (
        "json-access-token",
        '{"access_token": "ya29.a0AfH6SMB", "expires_in": 3599, "token_type": "Bearer"}',
        f'{{"access_token": "{R}", "expires_in": 3599, "token_type": "Bearer"}}',
    ),
    ("json-id-token", '{"id_token":"abc.def.ghi"}', f'{{"id_token":"{R}"}}'),
    ("json-refresh-token", '{"refresh_token": "1//0gXyZ"}', f'{{"refresh_token": "{R}"}}'),
    ("json-client-secret-escaped-quote", '{"client_secret": "GOCSPX-a\\"b"}', f'{{"client_secret": "{R}"}}'),
    ("json-in-json", '{"msg": "{\\"password\\": \\"hunter2\\"}"}', f'{{"msg": "{{\\"password\\": \\"{R}\\"}}"}}'),
    ("python-repr", "{'api_key': 'AIzaSyD-abc'}", f"{{'api_key': '{R}'}}"),
    (
        "form-refresh-token",
        "POST /token grant_type=refresh_token&refresh_token=1//0gXYZ&client_id=123",
        f"POST /token grant_type=refresh_token&refresh_token={R}&client_id=123",
    ),
    ("x-auth-token-header", "> X-Auth-Token: gAAAAABk1234", f"> X-Auth-Token: {R}"),
    ("x-vault-token-header", "X-Vault-Token: hvs.abc", f"X-Vault-Token: {R}"),
    ("authorization-bearer", "> Authorization: Bearer sk-live-123", f"> Authorization: Bearer {R}"),
    ("authorization-basic", "authorization: Basic dXNlcjpwYXNzd29yZA==", f"authorization: Basic {R}"),
    ("bearer-alone", "sending bearer abc.def to the hub", f"sending bearer {R} to the hub"),
    ("token-flag-equals", "running plugin --token=abc123 --verbose", f"running plugin --token={R} --verbose"),
    ("token-flag-space", "running plugin --token abc123 --verbose", f"running plugin --token {R} --verbose"),
    ("password-flag", "mysql --password=hunter2 -h db", f"mysql --password={R} -h db"),
    ("client-secret-flag", "az login --client-secret=s3cr3t~x", f"az login --client-secret={R}"),
    ("api-key-and-apikey", "api_key=AIzaSyD-abc apikey=xyz", f"api_key={R} apikey={R}"),
    (
        "url-userinfo",
        "git clone https://user:ghp_abc123@github.com/org/repo",
        f"git clone https://user:{R}@github.com/org/repo",
    ),
    ("url-token-as-user", "fetch https://ghp_tok123@github.com/x", f"fetch https://{R}@github.com/x"),
    (
        "query-access-token",
        "GET https://idp.example/cb?state=1&access_token=AT123&x=2#frag",
        f"GET https://idp.example/cb?state=1&access_token={R}&x=2#frag",
    ),
    (
        "query-two-secrets",
        "GET /cb?access_token=AT1&refresh_token=RT2&x=2",
        f"GET /cb?access_token={R}&refresh_token={R}&x=2",
    ),
    (
        "jwt",
        "token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl expired",
        f"token {R} expired",
    ),
    ("yaml-password", "password: hunter2", f"password: {R}"),
    ("yaml-client-key-data", "clientKeyData: abc\n", f"clientKeyData: {R}\n"),
    (
        "kubeconfig-client-key-data",
        "client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF",
        f"client-key-data: {R}",
    ),
    ("pem-whole", f"loaded {EC_PEM.strip()} ok", f"loaded {R} ok"),
    ("pem-whole-one-line", one_line(f"loaded {RSA_PEM} ok"), f"loaded {R} ok"),
    ("pem-cut-before-begin", one_line(RSA_PEM)[200:] + " plugin: bad key", f"{R} plugin: bad key"),
    ("pem-cut-in-begin-line", one_line(RSA_PEM)[11:] + " plugin: bad key", f"{R} plugin: bad key"),
    ("pem-lines-without-end", one_line(RSA_PEM)[300:-40], R),
    ("pem-json-escaped-cut", json.dumps(RSA_PEM)[300:], f'{R}\\n"'),
]

# Text that looks a little like a secret but is not one, and must stay as it is.
READABLE = [
    "get-token: cannot reach https://sts.example",
    "token expired",
    "refresh_token_file: /var/run/x",
    "--token-file /var/run/secrets/token",
    "field options.tokenFile: /tmp/x does not exist",
    "Basic authentication failed",
    'secrets "fleet-token" is forbidden',
    "sha256 expected " + "ab" * 32 + " got " + "cd" * 32,
    "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=",
    '{"token_type": "Bearer", "expires_in": 3600}',
    "https://sts.example:443/v1/token?audience=fleet",
    "provider p: exec: /usr/bin/plugin exited with code 1",
    # cpcreds' own messages name providers and fields whose names end like secrets
    'providers.yaml: provider "team-token": field type: unknown provider type \'vault\'',
    "provider team_token: exec: /usr/bin/plugin exited with code 1",
    'p.yaml: provider "hub": field options.clientSecret: Field required',
    '{"token": null, "password": 3}',
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(t, e, id=i) for i, t, e in FORMATS])
def test_common_stderr_formats_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", READABLE)
def test_ordinary_text_stays_readable(text: str) -> None:
    assert redact_text(text) == text


def test_redaction_is_idempotent() -> None:
    for _, text, _ in FORMATS:
        once = redact_text(text)
        assert redact_text(once) == once


# -- properties: a random secret in every format ---------------------------------------------------

_ENV_VALUE = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="\"'`<>&"), min_size=6)
_TOKEN68 = st.text(alphabet=string.ascii_letters + string.digits + "-._~+/", min_size=6).map(lambda s: s + "=")
_URL_SAFE = st.text(alphabet=string.ascii_letters + string.digits + "-._~%!$*+,;=", min_size=6)
_ANY_TEXT = st.text(min_size=6, max_size=40)
_B64URL = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=4, max_size=60)
_FLAG_VALUE = _ENV_VALUE.filter(lambda s: not s.startswith("-"))

Template = Callable[[str], str]
TEMPLATES: list[tuple[str, Template, st.SearchStrategy[str]]] = [
    ("vault-token-env", lambda s: f"error: VAULT_TOKEN={s} rejected", _ENV_VALUE),
    ("aws-secret-env", lambda s: f"AWS_SECRET_ACCESS_KEY={s}", _ENV_VALUE),
    ("aws-session-env", lambda s: f"env AWS_SESSION_TOKEN={s} aws sts", _ENV_VALUE),
    ("suffix-env", lambda s: f"ACME_API_KEY={s}; ACME_DB_PASSWORD={s}; X_SECRET={s}", _ENV_VALUE),
    ("json-keys", lambda s: json.dumps({"access_token": s, "id_token": s, "refresh_token": s, "client_secret": s}), _ANY_TEXT),
    ("json-in-json", lambda s: json.dumps({"body": json.dumps({"password": s})}), _ANY_TEXT),
    ("yaml-key", lambda s: yaml.safe_dump({"token": s}, width=10**6), _ANY_TEXT.filter(lambda s: "\n" not in s)),
    ("form", lambda s: f"grant_type=refresh_token&refresh_token={s}&client_id=1", _URL_SAFE.filter(lambda s: "&" not in s)),
    ("query", lambda s: f"GET https://idp/cb?x=1&access_token={s}&y=2", _URL_SAFE.filter(lambda s: "&" not in s)),
    ("header", lambda s: f"X-Auth-Token: {s}", _ENV_VALUE),
    ("authorization-bearer", lambda s: f"Authorization: Bearer {s}", _TOKEN68),
    ("authorization-basic", lambda s: f"Authorization: Basic {s}", _TOKEN68),
    ("bearer", lambda s: f"using Bearer {s} now", _TOKEN68),
    ("flag-equals", lambda s: f"plugin --token={s} --password={s} --client-secret={s} -v", _ENV_VALUE),
    ("flag-space", lambda s: f"plugin --token {s} -v", _FLAG_VALUE),
    ("api-key", lambda s: f"api_key={s} apikey={s}", _ENV_VALUE),
    ("url-userinfo", lambda s: f"clone https://oauth2:{s}@git.example/repo.git", _URL_SAFE),
    ("jwt", lambda s: f"token eyJhbGciOiJFUzI1NiJ9.{s}.{s[::-1]} expired", _B64URL),
]


@pytest.mark.parametrize(("template", "secrets"), [pytest.param(t, s, id=i) for i, t, s in TEMPLATES])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_secret_never_survives(template: Template, secrets: st.SearchStrategy[str], data: st.DataObject) -> None:
    secret = data.draw(secrets)
    assume(secret not in template("X" * len(secret)))  # the secret is not just part of the wording
    assume(secret not in REDACTED)  # nor part of what replaces it
    text = template(secret)
    redacted = redact_text(text)
    assert secret not in redacted
    # The same once the exec runner has put stderr on one line.
    assert secret not in redact_text(one_line(text)) or secret not in one_line(text)


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(RSA_PEM) - 60), noise=st.text(alphabet="abc :-.", max_size=200))
def test_private_key_cut_anywhere_leaves_no_body_line(cut: int, noise: str) -> None:
    # The kept stderr tail can start anywhere inside the key, the BEGIN line included.
    text = one_line(noise + " " + RSA_PEM + " plugin: could not use the key")[len(noise) + 1 + cut :]
    redacted = redact_text(text)
    for line in RSA_BODY:
        for start in range(0, len(line) - 15, 8):
            assert line[start : start + 16] not in redacted
    assert redacted.endswith("plugin: could not use the key")


# -- through the CLI: a plugin that prints a key on stderr -------------------------------------------


def test_plugin_stderr_with_key_cut_by_the_tail_leaves_no_key_in_the_error(tmp_path: Path) -> None:
    from tests.fakes.builders import access_provider, cluster_profile, exec_entry
    from tests.test_cli import one_error_line, run_cli, write_config, write_yaml

    # BEGIN line plus >4 KiB after it: the kept 4 KiB tail starts inside the key body.
    stderr = RSA_PEM + "plugin: the identity provider refused this key; " + "details " * 350
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--exit-code", "1", "--stderr", stderr))
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", access_provider("fake")))
    line = one_error_line(run_cli("get-credential", "--config", config, "--profile", profile, cwd=tmp_path))
    assert "BEGIN" not in line  # the BEGIN line really was cut off
    assert "exited with code 1" in line
    for body_line in RSA_BODY:
        assert body_line[-16:] not in line and body_line[:16] not in line


def test_a_value_starting_with_an_angle_bracket_is_redacted_but_our_placeholders_stay() -> None:
    # Found by hypothesis (the spire provider's tests): "<" ended a bare value before it began.
    assert redact_text("token: <00000\n") == "token: [REDACTED]\n"
    assert redact_text("password=<hunter2>") == "password=[REDACTED]"
    assert redact_text("token: <a str of length 5, not shown>") == "token: <a str of length 5, not shown>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("provider token: abc123", "provider token: [REDACTED]"),
        ("PROVIDER token: abc123", "PROVIDER token: [REDACTED]"),
        ("field token: abc123", "field token: [REDACTED]"),
        ("option key: abc123", "option key: [REDACTED]"),
    ],
)
def test_strict_redaction_of_outside_text_has_no_exceptions(text: str, expected: str) -> None:
    # A plugin's stderr or Status message may say "provider token: ..." and mean it.
    assert redact_text(text, strict=True) == expected


def test_cpcreds_own_wording_stays_readable_only_in_lowercase() -> None:
    assert redact_text("option key: is not a known field") == "option key: is not a known field"
    assert redact_text("PROVIDER token: abc123") == "PROVIDER token: [REDACTED]"


# -- how programs echo a password on their stderr (issue 18, item 12) -----------------------------

ECHOED = [
    ("docker login -p hunter2 registry.io", f"docker login -p {R} registry.io"),
    ("docker login -phunter2 registry.io", f"docker login -p{R} registry.io"),
    ("docker login --password hunter2 registry.io", f"docker login --password {R} registry.io"),
    ("docker login --password=hunter2", f"docker login --password={R}"),
    ("podman login --pass hunter2", f"podman login --pass {R}"),
    ("curl -u robot:hunter2 https://registry.io/v2/", f"curl -u robot:{R} https://registry.io/v2/"),
    ("curl -urobot:hunter2 https://x", f"curl -urobot:{R} https://x"),
    ("curl --user 'robot:hunter2' https://x", f"curl --user 'robot:{R}' https://x"),
    ("login failed: password hunter2 rejected", f"login failed: password {R} rejected"),
    ("Password: hunter2", f"Password: {R}"),
    ("passwd=hunter2", f"passwd={R}"),
    ("proxy robot:hunter2@proxy.corp:3128 refused", f"proxy robot:{R}@proxy.corp:3128 refused"),
    ("GET https://robot:hunter2@registry.io/v2/", f"GET https://robot:{R}@registry.io/v2/"),
]

STILL_READABLE = [
    "password is incorrect",
    "invalid password for user robot",
    "docker login -u robot --password-stdin registry.io",
    "curl -u robot https://registry.io",
    "pulling registry.io/app@sha256:" + "ab" * 32,
    "git@github.com:org/repo.git: permission denied",
]


@pytest.mark.parametrize(("text", "expected"), ECHOED)
def test_passwords_programs_echo_on_stderr_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text, strict=True) == expected
    assert redact_text(redact_text(text, strict=True), strict=True) == expected


@pytest.mark.parametrize("text", STILL_READABLE)
def test_stderr_about_passwords_stays_readable(text: str) -> None:
    assert redact_text(text, strict=True) == text


_ECHO_TEMPLATES: list[Template] = [
    lambda s: f"docker login -p {s} registry.io",
    lambda s: f"docker login -p{s}",
    lambda s: f"docker login --password {s} registry.io",
    lambda s: f"docker login --password={s}",
    lambda s: f"curl -u robot:{s} https://registry.io/v2/",
    lambda s: f"curl --user robot:{s} https://x",
    lambda s: f"password {s}",
    lambda s: f"password: {s}",
    lambda s: f"passwd={s}",
    lambda s: f"https://robot:{s}@registry.io/v2/",
    lambda s: f"robot:{s}@registry.io",
]
_WORDS = st.sampled_from(["error:", "login", "failed", "for", "robot", "registry.io", "-v", "--debug", "at", "12:00", "(exit 1)", ""])
# A password as people choose them: letters, digits and some punctuation, with a digit somewhere.
_PASSWORD = st.text(alphabet=string.ascii_letters + string.digits + "!#$%*+,-.;=?^_~", min_size=8, max_size=24).filter(
    lambda s: any(c.isdigit() for c in s) and not s.startswith("-") and "://" not in s
)


@settings(max_examples=300, deadline=None)
@given(
    template=st.sampled_from(_ECHO_TEMPLATES),
    secret=_PASSWORD,
    before=st.lists(_WORDS, max_size=3).map(" ".join),
    after=st.lists(_WORDS, max_size=3).map(" ".join),
)
def test_a_password_echoed_on_a_stderr_line_never_survives(template: Template, secret: str, before: str, after: str) -> None:
    line = f"{before} {template(secret)} {after}".strip()
    assume(secret not in f"{before} {template('X' * len(secret))} {after}")
    assert secret not in redact_text(line, strict=True)


# -- showing a URL (serve's API and page, errors, logs): one rule, cpcreds._show.shown_url ----------

from cpcreds._show import shown_url  # noqa: E402

# Everything around a secret is lower case; a secret always holds an upper-case letter, so an
# upper-case letter in the shown form is a piece of a secret that leaked.
_host = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?(\.[a-z0-9]{1,8}){0,2}", fullmatch=True) | st.sampled_from(["127.0.0.1", "[::1]", "[fd00::1]"])
_port = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
_path = st.lists(st.text(alphabet=string.ascii_lowercase + string.digits + "-._~!$'()*+,;=:@%", max_size=8), max_size=3).map(lambda parts: "".join("/" + p for p in parts))
_plain_value = st.text(alphabet=string.ascii_lowercase + string.digits + "-._~!$'()*+,;:/?%", max_size=10)
_plain_key = st.sampled_from(["timeout", "watch", "limit", "region", "token_file", "tokentype", "expires_in", "keyring_path", "x", "a.b"])
_secret_key = st.sampled_from(["access_token", "token", "sig", "X-Amz-Signature", "X-Amz-Credential", "client_secret", "password", "api_key", "apikey", "auth", "id-token", "access%5ftoken"])
# RFC 3986 lets a userinfo or a query value hold these unescaped; people also paste "?", "#" and
# "/" into a password (and "@" percent-encoded).
_secret = st.builds(
    lambda head, tail: head + tail,
    st.text(alphabet=string.ascii_uppercase, min_size=1, max_size=4),
    st.text(alphabet=string.ascii_letters + string.digits + "-._~!$'()+,;=%:", max_size=16),
)
_password = st.builds(lambda secret, pasted: secret + pasted, _secret, st.sampled_from(["", "?", "#", "?x#y", "%40"]))


def _query(pairs: list[tuple[str, str]]) -> str:
    return "?" + "&".join(f"{k}={v}" for k, v in pairs) if pairs else ""


def _url(scheme: str, userinfo: str, host: str, port: str, path: str, query: str, fragment: str) -> str:
    return f"{scheme}://{userinfo + '@' if userinfo else ''}{host}{port}{path}{query}{fragment}"


_schemes = st.sampled_from(["https", "http", "socks5", "git+ssh"])


@settings(max_examples=400)
@given(
    scheme=_schemes,
    user=st.one_of(st.just(""), _secret, st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6)),
    password=st.one_of(st.none(), _password),
    host=_host,
    port=_port,
    path=_path,
    plain=st.lists(st.tuples(_plain_key, _plain_value.filter(lambda v: "#" not in v and "&" not in v)), max_size=3),
    secrets=st.lists(st.tuples(_secret_key, _secret), max_size=3),
    fragment=st.one_of(st.just(""), st.just("#section"), _secret.map(lambda s: f"#access_token={s}")),
    order=st.randoms(use_true_random=False),
)
def test_a_shown_url_holds_no_secret_of_its_userinfo_or_query(
    scheme: str, user: str, password: str | None, host: str, port: str, path: str, plain: list[tuple[str, str]], secrets: list[tuple[str, str]], fragment: str, order: Any
) -> None:
    userinfo = user if password is None else f"{user}:{password}"
    if not path and any("@" in v for _, v in plain):
        path = "/"  # "host?q=a@b" without a path reads as a userinfo, and is shown as one
    pairs = plain + secrets
    order.shuffle(pairs)
    url = _url(scheme, userinfo, host, port, path, _query(pairs), fragment)
    shown = shown_url(url)
    assert not any(c in string.ascii_uppercase for c in shown.replace("X-Amz-Signature", "").replace("X-Amz-Credential", "")), (url, shown)
    assert shown.startswith(f"{scheme}://")
    assert host + port in shown
    if userinfo:
        assert f"://***@{host}" in shown
    for key, value in plain:
        assert f"{key}={value}" in shown  # what is not secret stays readable
    for key, _ in secrets:
        assert f"{key}=***" in shown


@settings(max_examples=300)
@given(
    scheme=_schemes,
    host=_host,
    port=_port,
    path=_path,
    plain=st.lists(st.tuples(_plain_key, _plain_value.filter(lambda v: "#" not in v and "&" not in v and "@" not in v)), max_size=4),
    fragment=st.sampled_from(["", "#", "#section", "#a=b"]),
)
def test_a_url_with_nothing_secret_is_shown_unchanged(scheme: str, host: str, port: str, path: str, plain: list[tuple[str, str]], fragment: str) -> None:
    url = _url(scheme, "", host, port, path, _query(plain), fragment)
    assert shown_url(url) == url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://admin:hunter2@k8s.example:6443/", "https://***@k8s.example:6443/"),
        ("https://TOKEN@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
        ("https://k8s.example?access_token=abc&watch=1", "https://k8s.example?access_token=***&watch=1"),
        ("https://user:pa?ss#word@h/p", "https://***@h/p"),
        ("https://h/p?a=1&sig=xyz#frag", "https://h/p?a=1&sig=***#frag"),
        ("https://h/p?token", "https://h/p?token"),  # a key without a value hides nothing
        ("user:pass@proxy.example:3128", "***@proxy.example:3128"),
        ("", ""),
        ("not a url", "not a url"),
        ("hub (in-cluster)", "hub (in-cluster)"),
    ],
)
def test_shown_url_examples(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@given(st.text(max_size=80))
def test_shown_url_never_raises_and_keeps_text_without_userinfo_or_query(text: str) -> None:
    shown = shown_url(text)
    assert isinstance(shown, str)
    if "@" not in text and "?" not in text and "#" not in text:
        assert shown == text


# -- reprs and `cpcreds resolve` show URLs as every other surface does --------------------------


def test_a_cluster_binding_and_resolved_plan_never_show_a_secret_inside_the_server_url() -> None:
    from cpcreds import CredentialEngine, ProviderConfig
    from tests.fakes.builders import access_provider, cluster_profile

    server = "https://admin:Hunter2Password@spoke.example:6443/?access_token=SecretTok3n"
    profile = cluster_profile("spoke", access_provider("p", server=server, exec_extension={"clusterName": "c"}))
    config = ProviderConfig.from_dict({"providers": [{"name": "p", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/true"}}]})
    with CredentialEngine(config) as engine:
        binding = engine.bind(profile)
        plan = binding.plan
        shown = [repr(binding), repr(plan), repr(plan.cluster), json.dumps(plan.to_dict())]
    for text in shown:
        assert "Hunter2Password" not in text and "SecretTok3n" not in text, text
        assert "spoke.example:6443" in text
    assert plan.to_dict(show_values=True)["cluster"]["server"] == server  # asked for: as written
