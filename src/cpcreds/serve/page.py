"""The human status page: a summary first (counts by state and by provider, where profiles come
from, the last reload), then one page of profiles, what needs attention first, with a filter
box. Every value is escaped; the small script only re-fetches the page itself every 10 s and
swaps in the new summary and rows (the operator's filter, typing and scroll stay), and without
JavaScript a meta refresh of the same address does the same."""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

if TYPE_CHECKING:
    from .paging import Query
    from .status import StatusBoard

__all__ = ["render_status_page", "PAGE_SIZE"]

#: Profiles on one page of the status page (``?limit=`` changes it).
PAGE_SIZE = 100
_REFRESH_SECONDS = 10

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1rem 1.5rem; color: #222; }
h1 { font-size: 1.3rem; margin: 0 0 0.3rem; } h1 small { font-weight: normal; color: #666; font-size: 0.9rem; }
header p, header dl { margin: 0.2rem 0; } dl { display: flex; flex-wrap: wrap; gap: 0 1.5rem; font-size: 0.9rem; }
dt { font-weight: 600; } dt::after { content: ":"; } dd { margin: 0 0 0 0.3rem; }
.wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9rem; }
#profiles table { width: 100%; }
th, td { text-align: left; padding: 0.25rem 0.6rem; border-bottom: 1px solid #ddd; vertical-align: top; white-space: nowrap; }
th { background: #f4f4f4; } td.n { text-align: right; }
.ready { color: #17692e; } .failing, .invalid { color: #b00020; } .pending, .unmatched { color: #8a6100; }
td.error { white-space: normal; min-width: 20rem; max-width: 40rem; overflow-wrap: normal; word-break: normal; }
form { margin: 0.8rem 0 0.5rem; display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; }
nav a { margin-right: 1rem; } time { text-decoration: underline dotted; }
"""

# Re-fetches this very address (its filter and page) and swaps the parts that change; skipped
# while the operator is in the filter box, so nothing they type is lost.
_SCRIPT = """
(function () {
  var parts = ["summary", "notices", "profiles"];
  function mark() {
    var s = document.getElementById("summary");
    if (s) document.documentElement.setAttribute("data-summary-bottom", String(Math.ceil(s.getBoundingClientRect().bottom + window.scrollY)));
  }
  function later() { setTimeout(refresh, %d); }
  function refresh() {
    var a = document.activeElement;
    if (a && a.form && a.form.id === "filter") return later();
    fetch(location.href, {cache: "no-store"}).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.text();
    }).then(function (text) {
      var next = new DOMParser().parseFromString(text, "text/html");
      parts.forEach(function (id) {
        var now = document.getElementById(id), fresh = next.getElementById(id);
        if (now && fresh) now.replaceWith(fresh);
      });
      mark();
    }).catch(function () {}).then(later);
  }
  mark();
  later();
})();
""" % (_REFRESH_SECONDS * 1000)


def _cell(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _epoch(rfc3339: str) -> float:
    return datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def _relative(seconds: float) -> str:
    """``in 58 min`` / ``3 min ago`` for a time ``seconds`` away (negative: past)."""
    span = abs(seconds)
    if span < 90:
        amount = f"{span:.0f} s"
    elif span < 90 * 60:
        amount = f"{span / 60:.0f} min"
    elif span < 48 * 3600:
        amount = f"{span / 3600:.0f} h"
    else:
        amount = f"{span / 86400:.0f} d"
    return f"in {amount}" if seconds >= 0 else f"{amount} ago"


def _time(rfc3339: str | None, now: float, *, due: bool = False) -> str:
    """A relative time, the absolute one (UTC) on hover. With ``due``, a time within the second or
    past (a fetch that is due or running; the times are whole seconds) reads ``now``."""
    if not rfc3339:
        return ""
    absolute = rfc3339.replace("T", " ").replace("Z", " UTC")
    away = _epoch(rfc3339) - now
    text = "now" if due and away < 1 else _relative(away)
    return f'<time datetime="{_cell(rfc3339)}" title="{_cell(absolute)}">{_cell(text)}</time>'


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


def _link(text: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v})
    return f'<a href="/{"?" + query if query else ""}">{text}</a>'


def _summary(board: StatusBoard, now: float) -> str:
    from .. import __version__

    not_ready = board.readiness()
    counts = board.counts()
    by_provider = board.counts_by_provider()
    states = [state for state, n in counts.items() if n] or ["ready"]
    head = "".join(f'<th class="{_cell(s)}">{_link(_cell(s), state=s)}</th>' for s in states)
    number = '<td class="n">{}</td>'.format
    rows = [f"<tr><th>all ({sum(counts.values())})</th>{''.join(number(counts[s]) for s in states)}</tr>"]
    for provider, per_state in by_provider.items():
        name = _link(_cell(provider), provider=provider) if provider else "(no provider)"
        rows.append(f"<tr><th>{name}</th>{''.join(number(per_state.get(s, 0)) for s in states)}</tr>")
    facts = [("Source", board.source_detail or board.source)]
    if board.kubeconfig_dir:
        facts.append(("Kubeconfigs", board.kubeconfig_dir))
    reload_text = "none since start"
    if board.last_reload is not None:
        at, why, problem = board.last_reload
        reload_text = f"{'failed' if problem else 'ok'} ({why}), {_relative(at - now)}"
    facts.append(("Last reload", reload_text))
    status = "Ready" if not_ready is None else f"Not ready ({_cell(not_ready)})"
    return (
        '<header id="summary">'
        f"<h1>cpcreds serve <small>{_cell(__version__)}</small></h1>"
        f'<p class="{"ready" if not_ready is None else "failing"}">{status}</p>'
        f"<dl>{''.join(f'<div><dt>{k}</dt><dd>{_cell(v)}</dd></div>' for k, v in facts)}</dl>"
        f'<div class="wrap"><table class="counts"><thead><tr><th>provider</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        '<nav><a href="/v1/clusters?limit=100">/v1/clusters</a><a href="/metrics">/metrics</a><a href="/healthz">/healthz</a><a href="/readyz">/readyz</a></nav>'
        "</header>"
    )


def _notices(board: StatusBoard) -> str:
    problems = board.problems()
    problem_list = "".join(f"<li><b>{_cell(origin)}</b>: {_cell(problem)}</li>" for origin, problem in sorted(problems.items()))
    return (
        '<section id="notices">'
        + (f'<h2>Config</h2><p class="failing">The config {_cell(board.config_error)}</p>' if board.config_error else "")
        + (f"<h2>Inventory problems</h2><ul>{problem_list}</ul>" if problem_list else "")
        + "</section>"
    )


def _filter_box(board: StatusBoard, query: Query) -> str:
    from .status import STATES

    def options(values: Sequence[str], chosen: str | None, everything: str) -> str:
        items = [f'<option value="">{everything}</option>']
        items += [f'<option value="{_cell(v)}"{" selected" if v == chosen else ""}>{_cell(v)}</option>' for v in values]
        return "".join(items)

    providers = [p for p in board.counts_by_provider() if p]
    return (
        '<form id="filter" method="get" action="/">'
        f'<label>State <select name="state">{options(STATES, query.state, "any")}</select></label>'
        f'<label>Provider <select name="provider">{options(providers, query.provider, "any")}</select></label>'
        f'<label>Name starts with <input name="prefix" value="{_cell(query.prefix)}" placeholder="namespace/name" size="24"></label>'
        '<button type="submit">Filter</button> <a href="/">clear</a></form>'
    )


def _profiles(clusters: Sequence[Mapping[str, Any]], query: Query, token: str | None, now: float) -> str:
    probes = any(c.get("probe") for c in clusters)
    health = any(c.get("controlPlaneHealthy") for c in clusters)
    head = ["Profile", "Provider", "State", "Failures", "Expires", "Next refresh", "Last success"]
    head += ["Probe"] * probes + ["ControlPlaneHealthy"] * health + ["Last error"]
    rows = []
    for c in clusters:
        state = _cell(c["state"])
        provider = c["provider"] or ""
        if c.get("answeredBy") and c["answeredBy"] != provider:
            provider = f"{provider} → {c['answeredBy']} (failed over)"
        error = (c.get("lastError") or "") + (f" (kubeconfig not written: {c['kubeconfigError']})" if c.get("kubeconfigError") else "")
        cells = [
            f'<td><a href="/v1/clusters/{_cell(c["key"])}">{_cell(c["key"])}</a></td>',
            f"<td>{_cell(provider)}</td>",
            f'<td class="{state}">{state}</td>',
            f'<td class="n">{_cell(c["consecutiveFailures"] or "")}</td>',
            f"<td>{_time(c['expirationTimestamp'], now)}</td>",
            f"<td>{_time(c['nextRefresh'], now, due=True)}</td>",
            f"<td>{_time(c['lastSuccess'], now)}</td>",
        ]
        if probes:
            cells.append(f"<td>{_cell(_probe(c['probe']))}</td>")
        if health:
            cells.append(f"<td>{_cell(_healthy(c['controlPlaneHealthy']))}</td>")
        cells.append(f'<td class="error">{_cell(error)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    filters = {"state": query.state, "provider": query.provider, "prefix": query.prefix, "limit": query.limit if query.limit != PAGE_SIZE else None}
    pager = []
    if query.continue_:
        pager.append(_link("first page", **filters))
    if token:
        pager.append(_link("next page →", **filters, **{"continue": token}))
    shown = f"{len(rows)} profile{'s' if len(rows) != 1 else ''} on this page, what needs attention first" if rows else "No profile matches."
    return (
        '<section id="profiles">'
        f"<p>{shown}</p>"
        f'<div class="wrap"><table><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        f'<nav class="pager">{"".join(pager)}</nav>'
        "</section>"
    )


def render_status_page(board: StatusBoard, query: Query, clusters: Sequence[Mapping[str, Any]], token: str | None) -> str:
    """The page at ``/`` for ``query`` (its page of ``clusters`` and the next page's ``token``).
    Costs O(page + states x providers), whatever the fleet's size."""
    now = time.time()
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<noscript><meta http-equiv="refresh" content="{_REFRESH_SECONDS}"></noscript>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>cpcreds serve</title><style>{_STYLE}</style></head><body>"
        + _summary(board, now)
        + _notices(board)
        + _filter_box(board, query)
        + _profiles(clusters, query, token, now)
        + f"<script>{_SCRIPT}</script></body></html>\n"
    )
