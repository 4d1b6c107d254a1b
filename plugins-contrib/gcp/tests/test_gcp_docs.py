"""The examples of docs/providers-gcp.md and the package README are valid as shown: the provider
configs load with the gcp provider, the ClusterProfile resolves to it, the exec arguments are
flags the console script takes, and every option is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderConfig  # noqa: E402
from cpcreds.plugin import parse_option_flags  # noqa: E402
from cpcreds_gcp import GcpOptions  # noqa: E402
from cpcreds_gcp.plugin import ADC_FLAGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "docs" / "providers-gcp.md", ROOT / "plugins-contrib" / "gcp" / "README.md"]


def _block(page: Path, marker: str) -> str:
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL) if b.startswith(marker)]
    assert blocks, f"{page.name} has no yaml block starting with {marker!r}"
    return blocks[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_provider_config_and_cluster_profile_resolve_to_the_gcp_provider(page, make_engine):
    config = yaml.safe_load(_block(page, "# providers.yaml"))
    [entry] = config["providers"]
    engine = make_engine(entry["options"], timeout=entry["timeout"])  # options validated by the provider
    plan = engine.resolve(yaml.safe_load(_block(page, "# gke-1.yaml")))
    assert (plan.provider, plan.kind) == ("google", "gcp")
    assert plan.cluster.server.startswith("https://connectgateway.googleapis.com/")


def test_the_readme_shows_the_pages_example():
    for marker in ("# providers.yaml", "# gke-1.yaml", "# kubeconfig"):
        assert _block(PAGES[0], marker) == _block(PAGES[1], marker)


def _options_from_args(args: list[str]) -> GcpOptions:
    return GcpOptions.model_validate(parse_option_flags([a for a in args if a not in ADC_FLAGS]))


def test_the_exec_examples_are_flags_the_console_script_takes():
    exec_config = ProviderConfig.from_dict(yaml.safe_load(_block(PAGES[0], "# providers-exec.yaml"))).providers[0].exec_config
    options = _options_from_args(list(exec_config.args))
    assert options.impersonate_service_account == "fleet-reader@my-project.iam.gserviceaccount.com" and options.lifetime == 1800
    for page in PAGES:
        [user] = yaml.safe_load(_block(page, "# kubeconfig"))["users"]
        assert user["user"]["exec"]["command"] == "cpcreds-gcp"
        assert _options_from_args(user["user"]["exec"]["args"]) == GcpOptions()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_option_is_in_the_options_table(page):
    table = page.read_text(encoding="utf-8").split("## Options", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE))
    assert documented == {field.alias or name for name, field in GcpOptions.model_fields.items()}
