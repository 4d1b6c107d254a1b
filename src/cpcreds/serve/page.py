"""The human status page: one HTML table, no JavaScript, every value escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render_status_page"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { text-align: left; padding: 0.3rem 0.6rem; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; }
.ready { color: #17692e; } .failing, .invalid { color: #b00020; } .pending, .unmatched { color: #8a6100; }
.error { max-width: 40rem; overflow-wrap: anywhere; }
"""


def _cell(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _probe(probe: Mapping[str, Any] | None) -> str:
    if not probe:
        return ""
    text = f"HTTP {probe['status']}" if probe.get("status") else "no answer"
    text += f", {probe['latencySeconds'] * 1000:.0f} ms"
    if probe.get("error"):
        text += f": {probe['error']}"
    return text


def _healthy(condition: Mapping[str, Any] | None) -> str:
    if not condition:
        return ""
    return " ".join(str(condition.get(k)) for k in ("status", "reason") if condition.get(k))


def _kubeconfig(problem: str | None) -> str:
    return f" (kubeconfig not written: {problem})" if problem else ""


def render_status_page(
    clusters: Sequence[Mapping[str, Any]],
    problems: Mapping[str, str],
    *,
    not_ready: str | None,
    counts: Mapping[str, int],
    source: str,
    config_error: str | None = None,
) -> str:
    """The page at ``/``: a summary line (``not_ready``: why serve is not ready), a failed config
    reload, inventory problems, and one row per profile (with a kubeconfig that cannot be written)."""
    summary = ", ".join(f"{count} {state}" for state, count in counts.items() if count) or "no profiles"
    rows = []
    for c in clusters:
        state = _cell(c["state"])
        rows.append(
            "<tr>"
            f"<td>{_cell(c['key'])}</td>"
            f"<td>{_cell(c['provider'])}</td>"
            f'<td class="{state}">{state}</td>'
            f"<td>{_cell(c['expirationTimestamp'])}</td>"
            f"<td>{_cell(c['lastSuccess'])}</td>"
            f"<td>{_cell(_probe(c['probe']))}</td>"
            f"<td>{_cell(_healthy(c['controlPlaneHealthy']))}</td>"
            f'<td class="error">{_cell(c["lastError"])}{_cell(_kubeconfig(c.get("kubeconfigError")))}</td>'
            "</tr>"
        )
    problem_list = "".join(f"<li><b>{_cell(origin)}</b>: {_cell(problem)}</li>" for origin, problem in sorted(problems.items()))
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"refresh\" content=\"10\">"
        f"<title>cpcreds serve</title><style>{_STYLE}</style></head><body>"
        f"<h1>cpcreds serve</h1><p>Source: {_cell(source)}. {'Ready' if not_ready is None else 'Not ready (' + _cell(not_ready) + ')'}: {_cell(summary)}. "
        'Also: <a href="/v1/clusters">/v1/clusters</a> (JSON), <a href="/metrics">/metrics</a>.</p>'
        + (f'<h2>Config</h2><p class="failing">The config {_cell(config_error)}</p>' if config_error else "")
        + (f"<h2>Inventory problems</h2><ul>{problem_list}</ul>" if problem_list else "")
        + "<table><thead><tr><th>Profile</th><th>Provider</th><th>State</th><th>Expires</th><th>Last success</th>"
        "<th>Probe</th><th>ControlPlaneHealthy</th><th>Last error</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></body></html>\n"
    )
