"""Where an EKS token is signed for: the STS endpoint and its signing region, as botocore resolves
them for ``aws eks get-token``, and which region names exist.

Both come from botocore's own data, read by its loader: STS's endpoint rule set, evaluated by
botocore's ``EndpointProvider`` (the evaluator botocore's clients use), and the partitions
(``aws``, ``aws-cn``, ``aws-us-gov``, the isolated ``aws-iso*`` ones, ``aws-eusc``…): a new
partition or host arrives with botocore, never as a rule of ours. The rule set's inputs are the
ones botocore's client gives it: the region (``aws-global`` when none is set, as botocore's
global STS client), ``use_fips_endpoint`` (``AWS_USE_FIPS_ENDPOINT``), ``use_dualstack_endpoint``
(``AWS_USE_DUALSTACK_ENDPOINT``) and whether ``sts_regional_endpoints``
(``AWS_STS_REGIONAL_ENDPOINTS``) is ``legacy`` (the rule set then sends its legacy regions to the
global ``sts.amazonaws.com``). A configured endpoint (``AWS_ENDPOINT_URL_STS``) is used as it is,
as botocore uses it, signed for the region.

botocore's whole session (its service models, credential chain and clients) is not loaded for
this: only the loader and the rule-set evaluator are, and the data they read is read once per
process.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .failures import Unusable

__all__ = ["EndpointSettings", "StsEndpoint", "sts_endpoint", "is_region", "configured_endpoint"]

#: botocore's region when none is set: its STS client then resolves the global endpoint.
_NO_REGION = "aws-global"
#: What the global endpoint signs for when the rule set does not say (botocore's credential scope for it).
_GLOBAL_SIGNING_REGION = "us-east-1"


@dataclass(frozen=True)
class EndpointSettings:
    """The settings botocore's STS client hands the endpoint rule set: ``fips`` and ``dualstack``
    as configured (a string or a bool: botocore's ``ensure_boolean`` reads them when the rule set
    is evaluated, so that a run with a configured endpoint loads none of botocore)."""

    fips: object = False
    dualstack: object = False
    legacy_global: bool = False

    @classmethod
    def read(cls, get: Any = None) -> EndpointSettings:
        """From ``get(name)`` (a botocore session's ``get_config_variable``, which reads the
        environment and the profile), else from the environment alone."""
        if get is None:
            environ = os.environ
            values = {
                "use_fips_endpoint": environ.get("AWS_USE_FIPS_ENDPOINT"),
                "use_dualstack_endpoint": environ.get("AWS_USE_DUALSTACK_ENDPOINT"),
                "sts_regional_endpoints": environ.get("AWS_STS_REGIONAL_ENDPOINTS"),
            }
            get = values.get
        legacy = str(get("sts_regional_endpoints") or "regional").strip().lower()
        if legacy not in ("legacy", "regional"):
            raise Unusable("sts_regional_endpoints (AWS_STS_REGIONAL_ENDPOINTS) must be legacy or regional")
        return cls(get("use_fips_endpoint") or False, get("use_dualstack_endpoint") or False, legacy == "legacy")


class StsEndpoint(NamedTuple):
    url: str
    signing_region: str


def configured_endpoint(service: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint set for ``service`` in the environment, as botocore reads it:
    ``AWS_ENDPOINT_URL_<SERVICE>``, else ``AWS_ENDPOINT_URL``; none when
    ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is true."""
    environ = os.environ if environ is None else environ
    if environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true":
        return None
    value = environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or environ.get("AWS_ENDPOINT_URL")
    return value.rstrip("/") if value else None


@functools.cache
def _data() -> tuple[Any, Any]:
    from botocore.loaders import create_loader

    loader = create_loader(os.environ.get("AWS_DATA_PATH"))  # where a botocore session's loader looks
    return loader.load_service_model("sts", "endpoint-rule-set-1"), loader.load_data("partitions")


@functools.cache
def _provider() -> Any:
    from botocore.endpoint_provider import EndpointProvider

    ruleset, partitions = _data()
    return EndpointProvider(ruleset_data=ruleset, partition_data=partitions)


@functools.cache
def _region_patterns() -> tuple[re.Pattern[str], ...]:
    # Each partition's regionRegex (ECMAScript syntax: \w and \d are ASCII there).
    return tuple(re.compile(partition["regionRegex"], re.ASCII) for partition in _data()[1]["partitions"])


def is_region(name: str) -> bool:
    """Whether ``name`` is a region name of one of botocore's partitions (``us-west-2``,
    ``cn-north-1``, ``us-iso-east-1``, ``eusc-de-east-1``…)."""
    return 0 < len(name) <= 64 and any(pattern.fullmatch(name) for pattern in _region_patterns())


def sts_endpoint(region: str | None, settings: EndpointSettings | None = None) -> StsEndpoint:
    """The STS endpoint a token for ``region`` (``None``: none set) is sent to, and the region it
    is signed for. Raises :class:`~cpcreds_aws.failures.Unusable` (botocore's resolution error,
    without its text) when the rule set has no endpoint for these settings."""
    configured = configured_endpoint("sts")
    if configured:
        return StsEndpoint(configured, region or _GLOBAL_SIGNING_REGION)
    settings = settings or EndpointSettings.read()
    from botocore.exceptions import EndpointResolutionError
    from botocore.utils import ensure_boolean  # what botocore's config store applies to these settings

    try:
        endpoint = _provider().resolve_endpoint(
            Region=region or _NO_REGION,
            UseFIPS=ensure_boolean(settings.fips),
            UseDualStack=ensure_boolean(settings.dualstack),
            UseGlobalEndpoint=settings.legacy_global,
        )
    except EndpointResolutionError:
        raise Unusable("botocore's STS endpoint rules have no endpoint for this region and these settings") from None
    schemes = endpoint.properties.get("authSchemes") or [{}]
    signing = schemes[0].get("signingRegion") if isinstance(schemes[0], dict) else None
    return StsEndpoint(str(endpoint.url).rstrip("/"), signing or region or _GLOBAL_SIGNING_REGION)
