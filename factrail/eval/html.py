"""The `factrail report` page: one self-contained HTML file.

Inline CSS (system fonts, light and dark schemes, tabular numbers), inline SVG plots
(`eval.svg`) and a few lines of inline script that sort the table by a clicked column; a
Content-Security-Policy that forbids loading anything. Every text is escaped; session names,
clients and models arrive redacted and are redacted again here.
"""

from __future__ import annotations

from html import escape

from factrail.core.redact import redact
from factrail.eval.svg import Point, ratio_plot, tokens, turns_plot
from factrail.eval.userreport import Figures, Report

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

CSS = """
:root { --bg:#ffffff; --fg:#1b1f24; --muted:#5b6570; --line:#d9dee3; --panel:#f6f8fa;
  --accent:#2563eb; --erase:#d97706; --whole:#8a94a0; --good:#15803d; --bad:#b91c1c; }
@media (prefers-color-scheme: dark) {
  :root { --bg:#0f1216; --fg:#e6e8eb; --muted:#9aa4ae; --line:#2a3038; --panel:#171b21;
    --accent:#60a5fa; --erase:#f59e0b; --whole:#6b7480; --good:#4ade80; --bad:#f87171; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1280px; padding: 28px 24px 48px; background: var(--bg);
  color: var(--fg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 32px 0 8px; }
p.sub, .note { color: var(--muted); margin: 0 0 16px; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(200px, 1fr)); gap: 12px; }
.tile { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; }
.tile .v { font-size: 24px; font-weight: 600; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
.tile .k { color: var(--muted); font-size: 12px; }
.plot { width: 100%; height: auto; background: var(--panel); border: 1px solid var(--line);
  border-radius: 8px; }
.plot .grid { stroke: var(--line); stroke-width: 1; }
.plot .axis { stroke: var(--muted); stroke-width: 1; }
.plot .ref { stroke: var(--fg); stroke-width: 1; stroke-dasharray: 5 4; opacity: .6; }
.plot text { fill: var(--muted); font-size: 11px; font-variant-numeric: tabular-nums; }
.plot .ref-label { fill: var(--fg); opacity: .7; }
.plot .s-factrail { fill: var(--accent); }
.plot .s-erase { fill: none; stroke: var(--erase); stroke-width: 1.5; }
.plot polyline { fill: none; stroke-width: 1.6; }
.plot polyline.s-whole { stroke: var(--whole); }
.plot polyline.s-factrail { stroke: var(--accent); fill: none; }
.legend { color: var(--muted); font-size: 12px; margin: 6px 0 0; }
.sw { display: inline-block; width: 10px; height: 10px; border-radius: 50%;
  margin: 0 4px 0 12px; vertical-align: -1px; }
.sw.f { background: var(--accent); } .sw.e { border: 2px solid var(--erase); }
.sw.w { background: var(--whole); border-radius: 2px; height: 3px; vertical-align: 2px; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums;
  font-size: 13px; }
th, td { padding: 6px 6px; border-bottom: 1px solid var(--line); text-align: right;
  white-space: nowrap; }
th { position: sticky; top: 0; background: var(--bg); font-weight: 600; cursor: pointer;
  user-select: none; white-space: normal; vertical-align: bottom; font-size: 12px; }
th:first-child, td:first-child, th.t, td.t { text-align: left; }
.cut { display: inline-block; max-width: 170px; overflow: hidden; text-overflow: ellipsis;
  vertical-align: bottom; } td.t .cut { max-width: 110px; }
tbody tr:hover { background: var(--panel); }
tfoot td { font-weight: 600; border-top: 2px solid var(--line); }
.good { color: var(--good); } .bad { color: var(--bad); }
.wrap { overflow-x: auto; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
"""

SCRIPT = """
document.querySelectorAll("table.sessions th").forEach((th, col) => {
  th.addEventListener("click", () => {
    const body = th.closest("table").tBodies[0];
    const down = th.dataset.dir !== "desc";
    th.dataset.dir = down ? "desc" : "asc";
    const key = (tr) => tr.children[col].dataset.v ?? tr.children[col].textContent;
    const rows = [...body.rows].sort((a, b) => {
      const x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
      const c = isNaN(nx) || isNaN(ny) ? String(x).localeCompare(String(y)) : nx - ny;
      return down ? -c : c;
    });
    rows.forEach((tr) => body.appendChild(tr));
  });
});
"""

COLUMNS = (
    ("session", "t"),
    ("client", "t"),
    ("model", "t"),
    ("turns", ""),
    ("largest request", ""),
    ("largest via factrail", ""),
    ("compac&shy;tions", ""),
    ("billed: factrail", ""),
    ("erase rule", ""),
    ("everything", ""),
    ("factrail ÷ everything", ""),
    ("factrail ÷ erase", ""),
    ("facts kept: factrail / erase", ""),
)


def _safe(text: str) -> str:
    """Redacted, then escaped."""
    return escape(redact(text).text)


def _cut(text: str) -> str:
    """Redacted, escaped, cut to the column's width with an ellipsis."""
    return f'<span class="cut">{_safe(text)}</span>'


def _ratio(value: float) -> str:
    css = "good" if value < 0.995 else "bad" if value > 1.005 else ""
    return f'<td class="{css}" data-v="{value:.6f}">{value:.3f}</td>'


def _num(value: float) -> str:
    return f'<td data-v="{value:.0f}">{value:,.0f}</td>'


def _facts(kept: int, other: int, needed: int) -> str:
    if not needed:
        return '<td data-v="2">–</td>'
    return f'<td data-v="{kept / needed:.6f}">{kept / needed:.3f} / {other / needed:.3f}</td>'


def _row(f: Figures) -> str:
    vs_erase = f.billed_factrail / f.billed_erase if f.billed_erase else 1.0
    return (
        f'<tr><td title="{_safe(f.name)}">{_cut(f.name)}</td>'
        f'<td class="t" title="{_safe(f.client)}">{_cut(f.client)}</td>'
        f'<td class="t" title="{_safe(f.model)}">{_cut(f.model or "–")}</td>'
        f"{_num(f.turns)}{_num(f.peak_whole)}{_num(f.peak_factrail)}{_num(f.compactions)}"
        f"{_num(f.billed_factrail)}{_num(f.billed_erase)}{_num(f.billed_everything)}"
        f"{_ratio(f.ratio_factrail)}{_ratio(vs_erase)}"
        f"{_facts(f.facts_factrail, f.facts_erase, f.facts_needed)}</tr>"
    )


def _tile(value: str, label: str) -> str:
    return (
        f'<div class="tile"><div class="v">{escape(value)}</div>'
        f'<div class="k">{escape(label)}</div></div>'
    )


def _headline(r: Report) -> str:
    everything = r.total("billed_everything")
    factrail = r.total("billed_factrail")
    erase = r.total("billed_erase")
    needed = r.total("facts_needed")
    compacted = sum(1 for f in r.sessions if f.compactions)
    tiles = [
        _tile(f"{factrail / everything:.3f}" if everything else "–",
              "billed through factrail ÷ sending everything"),
        _tile(f"{factrail / erase:.3f}" if erase else "–",
              "billed through factrail ÷ the erase rule"),
        _tile(f"{erase / everything:.3f}" if everything else "–",
              "the erase rule ÷ sending everything"),
        _tile(f"{len(r.sessions)}", f"sessions replayed, {compacted} compacted at least once"),
    ]  # fmt: skip
    if needed:
        kept = r.total("facts_factrail") / needed
        lost = r.total("facts_erase") / needed
        tiles.append(_tile(f"{kept:.3f} / {lost:.3f}",
                           "facts kept when used: factrail / the erase rule"))  # fmt: skip
    return '<div class="tiles">' + "".join(tiles) + "</div>"


def _settings_line(r: Report) -> str:
    trigger = (
        f"a trigger of {r.trigger:,} tokens"
        if r.trigger
        else "each session's trigger from the settings"
    )
    triggers = sorted({f.trigger for f in r.sessions})
    if not r.trigger and triggers:
        trigger += " (" + ", ".join(tokens(t) for t in triggers) + ")"
    profiles = ", ".join(sorted({f.profile for f in r.sessions}))
    return (
        f"{len(r.sessions)} session(s) replayed at {trigger}, billed under the "
        f"{escape(r.price_profile)} price profile ({escape(profiles)}), in token-units: "
        "an uncached input token is 1."
    )


def _table(r: Report) -> str:
    head = "".join(f'<th class="{c}">{n}</th>' for n, c in COLUMNS)  # constant, safe HTML
    rows = "".join(_row(f) for f in sorted(r.sessions, key=lambda f: -f.billed_everything))
    everything = r.total("billed_everything")
    factrail = r.total("billed_factrail")
    erase = r.total("billed_erase")
    foot = (
        f"<tr><td>all sessions</td><td></td><td></td>{_num(r.total('turns'))}<td></td><td></td>"
        f"{_num(r.total('compactions'))}{_num(factrail)}{_num(erase)}{_num(everything)}"
        f"{_ratio(factrail / everything if everything else 1.0)}"
        f"{_ratio(factrail / erase if erase else 1.0)}<td></td></tr>"
    )
    return (
        f'<div class="wrap"><table class="sessions"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody><tfoot>{foot}</tfoot></table></div>"
    )


def _skipped(r: Report) -> str:
    if not r.skipped:
        return ""
    items = "".join(f"<li><code>{_safe(s.name)}</code>: {_safe(s.reason)}</li>" for s in r.skipped)
    return (
        f"<h2>Skipped files ({len(r.skipped)})</h2><details><summary>why each was left out"
        f"</summary><ul>{items}</ul></details>"
    )


def _trace(r: Report) -> str:
    t = r.trace
    if t is None or not t.whole:
        return ""
    return (
        f"<h2>Tokens per request: {_safe(t.name)}, the largest session</h2>"
        + turns_plot(t.whole, t.sent, t.trigger)
        + '<p class="legend"><span class="sw f"></span>sent through factrail'
        '<span class="sw w"></span>the whole transcript; dashed: the trigger (factrail '
        "compacts from 5/6 of it)</p>"
    )


def page(r: Report) -> str:
    """The whole HTML page for a report."""
    points = [
        Point(redact(f.name).text, f.peak_whole, f.ratio_factrail, f.ratio_erase)
        for f in r.sessions
    ]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>factrail report</title><style>{CSS}</style></head><body>"
        "<h1>What factrail would have billed on your sessions</h1>"
        f'<p class="sub">{_settings_line(r)}</p>'
        + _headline(r)
        + "<h2>Billed per session, over sending everything</h2>"
        + ratio_plot(points)
        + '<p class="legend"><span class="sw f"></span>through factrail'
        '<span class="sw e"></span>the erase rule; below the dashed line costs less than '
        "sending everything (hover a dot for its session)</p>"
        + _trace(r)
        + "<h2>Sessions</h2>"
        + _table(r)
        + '<p class="note">Each session is replayed one request per assistant turn, as its '
        "client sent it: through factrail's compactor (the gateway's own code), through the "
        "erase rule (older results cut to 300 characters past the soft line) and whole. "
        "Billed: input tokens under the price profile's prompt-cache prices. Facts kept: of "
        "the tool-result tokens the agent went on to write past the soft line, the share "
        "still in what was sent. Click a column to sort.</p>"
        + _skipped(r)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )
