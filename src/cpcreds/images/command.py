"""``cpcreds image-credential``: the registry credentials a node's kubelet would use for an image.

The command's arguments (:func:`add_arguments`, called by :mod:`cpcreds.cli`) use the kubelet's
own flag names, and :func:`run` prints the answer of :class:`~cpcreds.ImageCredentials` on
stdout, passwords included:

- ``-o json`` (default): ``{"image", "registry", "credentials": [{"key", "username",
  "password", "provider"}]}``, best first, on one line;
- ``-o docker-config``: a docker ``config.json`` (``{"auths": {registry: {"auth", "username",
  "password"}}}``) that docker, podman, skopeo and crane read (``DOCKER_CONFIG=dir`` or
  ``--authfile``).

No credentials is not an error (the kubelet then pulls without any): the output is empty
(``"credentials": []``, ``"auths": {}``), a warning on stderr says why, and the exit code is 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

__all__ = ["DESCRIPTION", "HELP", "add_arguments", "run"]

HELP = "print an image's registry credentials from kubelet credential provider plugins (secrets on stdout)"
DESCRIPTION = (
    "Run the kubelet's image credential provider plugins (KEP-2133) for IMAGE, as a kubelet with "
    "the same --image-credential-provider-config and --image-credential-provider-bin-dir would, and "
    "print the credentials that apply to it, best first. The output holds passwords: send it to a "
    "file with mode 0600 or a pipe, not a terminal or a log. Exit 0 also when no provider has "
    "credentials for the image (a warning says so), 1 when the config or a plugin fails, 2 for a "
    "usage error."
)
EPILOG = """\
examples:
  cpcreds image-credential 123456789.dkr.ecr.eu-west-1.amazonaws.com/app:1.4 \\
      --image-credential-provider-config /etc/kubernetes/credential-providers.yaml \\
      --image-credential-provider-bin-dir /usr/local/bin/credential-providers
  umask 077; mkdir -p auth
  cpcreds image-credential gcr.io/project/app -o docker-config \\
      --image-credential-provider-config config.yaml --image-credential-provider-bin-dir bin > auth/config.json
  DOCKER_CONFIG=auth crane digest gcr.io/project/app:1.0
  skopeo inspect --authfile auth/config.json docker://gcr.io/project/app:1.0
"""


def _timeout(text: str) -> float:
    from ..config.durations import parse_duration

    problem = None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        problem = str(exc)
    else:
        if seconds > 0:
            return seconds
        problem = "must be more than 0s"
    raise argparse.ArgumentTypeError(problem)


def _annotation(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError("expected an annotation key, then '=', then its value")
    return key, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``cpcreds image-credential``."""
    # Raw, so that the examples keep their lines; the description is wrapped here instead.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = textwrap.fill(parser.description or DESCRIPTION, width=92)
    parser.epilog = EPILOG
    parser.add_argument("image", metavar="IMAGE", help="the image, as a pod spec names it (nginx:1.27, gcr.io/project/app@sha256:...)")
    kubelet = parser.add_argument_group("kubelet settings")
    kubelet.add_argument(
        "--image-credential-provider-config",
        dest="provider_config",
        metavar="FILE",
        required=True,
        help="the kubelet's CredentialProviderConfig (YAML or JSON), or a directory of them",
    )
    kubelet.add_argument(
        "--image-credential-provider-bin-dir",
        dest="bin_dir",
        metavar="DIR",
        required=True,
        help="the directory holding the plugins' executables",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=["json", "docker-config"],
        default="json",
        help="json (default): every credential that applies, best first; docker-config: a config.json for the image's registry",
    )
    parser.add_argument(
        "--timeout",
        type=_timeout,
        default=None,
        metavar="DURATION",
        help="bound on each plugin run (default: 1m, as the kubelet's)",
    )
    account = parser.add_argument_group("service account (providers with tokenAttributes)")
    account.add_argument(
        "--service-account-token-file",
        metavar="FILE",
        help="a service-account token sent as serviceAccountToken to providers whose tokenAttributes ask for one",
    )
    account.add_argument(
        "--service-account-annotation",
        dest="service_account_annotations",
        metavar="KEY=VALUE",
        type=_annotation,
        action="append",
        default=[],
        help="an annotation of that service account (repeatable), passed to providers that name its key",
    )


def _warn(message: str) -> None:
    from ..logs import redact_text

    sys.stderr.write(f"cpcreds: warning: {redact_text(message)}\n")


def run(args: argparse.Namespace) -> int:
    """Run the command; raises :class:`~cpcreds.CredentialError` (the CLI prints it)."""
    from .credentials import ImageCredentials
    from .runner import DEFAULT_TIMEOUT
    from .serviceaccount import missing_annotation

    options: dict[str, Any] = {"timeout": args.timeout or DEFAULT_TIMEOUT}
    if args.service_account_token_file:
        options["service_account_token_file"] = args.service_account_token_file
    if args.service_account_annotations:
        options["service_account_annotations"] = dict(args.service_account_annotations)
    with ImageCredentials.from_kubelet_config(args.provider_config, args.bin_dir, **options) as images:
        credentials = images.get(args.image)
        matching = set(images.providers_for(args.image))
        annotations = dict(args.service_account_annotations)
        for provider in images.config.providers:
            attributes = provider.token_attributes
            missing = missing_annotation(attributes, annotations) if attributes and args.service_account_token_file else None
            if provider.name in matching and missing is not None:
                matching.discard(provider.name)
                _warn(f"provider {provider.name} not run: the service account has no annotation {missing}, which its tokenAttributes require (the kubelet skips it too)")
        if not credentials:
            providers = [provider.name for provider in images.config.providers if provider.name in matching]
            if providers:
                _warn(f"no credentials for {credentials.image}: {', '.join(providers)} answered no key that matches it")
            elif not images.providers_for(args.image):
                _warn(f"no credentials for {credentials.image}: no provider's matchImages match it")
    if args.output == "docker-config":
        sys.stdout.write(json.dumps(credentials.docker_config(), indent=2) + "\n")
    else:
        sys.stdout.write(json.dumps(credentials.to_dict()) + "\n")
    return 0
