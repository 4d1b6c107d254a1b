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

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cpcreds.sdk import AccessPlan, Credential, ProviderError, hookimpl, parse_duration, provider_main


class EnvTokenOptions(BaseModel):
    """The entry's ``options:``. Unknown keys are errors, so typos are caught at load time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str = Field(default="FLEET_TOKEN_", pattern=r"^[A-Z_][A-Z0-9_]*$")
    ttl: float = 600.0  # seconds; written as a Go duration in the config

    @field_validator("ttl", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        seconds = parse_duration(value)  # "10m" -> 600.0; ValueError names the bad value
        if seconds <= 0:
            raise ValueError("must be longer than zero")
        return seconds


class EnvTokenProvider:
    """Built once per config entry; get_credential is called once per fetch."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = EnvTokenOptions.model_validate(dict(options))

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
