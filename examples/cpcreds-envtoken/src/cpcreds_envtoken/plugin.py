"""cpcreds provider type ``envtoken``: a bearer token per cluster, from an environment variable.

For a ClusterProfile whose client.authentication.k8s.io/exec extension says
``clusterName: spoke-1``, the token is the value of ``FLEET_TOKEN_SPOKE_1`` (the prefix is
configurable; the name is upper-cased and every other character becomes ``_``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from cpcreds.sdk import AccessPlan, Credential, Duration, Options, ProviderError, hookimpl, option, provider_main


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("must be longer than zero")
    return seconds


class EnvTokenOptions(Options):
    """A bearer token per cluster from the environment variable <prefix><CLUSTER_NAME>. Unknown
    options are errors, so typos are caught at load time."""

    prefix: str = option("FLEET_TOKEN_", pattern=r"^[A-Z_][A-Z0-9_]*$", description="Start of the variables' names.")
    ttl: Duration = option(600.0, check=_positive, description="How long a token is used (a Go duration: 10m, 1h).")


class EnvTokenProvider:
    """Built once per config entry; get_credential is called once per fetch."""

    #: What `cpcreds-envtoken --help` lists and its flags may set.
    options_model = EnvTokenOptions

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = EnvTokenOptions.read(options)  # an OptionError names the option

    def get_credential(self, plan: AccessPlan) -> Credential:
        config = plan.cluster.config if isinstance(plan.cluster.config, dict) else {}
        cluster_name = config.get("clusterName")
        if not cluster_name:
            raise ProviderError("the ClusterProfile has no clusterName in its exec extension", provider=plan.provider)
        variable = self.options.prefix + re.sub(r"[^A-Z0-9]", "_", str(cluster_name).upper())
        token = os.environ.get(variable)
        if not token:
            # Name the variable, never its value.
            raise ProviderError(f"envtoken: {variable} is not set", provider=plan.provider)
        expiry = datetime.now(timezone.utc) + timedelta(seconds=self.options.ttl)
        return Credential(token=token, expiration_timestamp=expiry)


@hookimpl
def cpcreds_register_providers(register):
    register("envtoken", EnvTokenProvider)


# The same provider as a KEP-541 exec plugin: the `cpcreds-envtoken` console script.
main = provider_main("envtoken", EnvTokenProvider)
