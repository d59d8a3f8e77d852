"""`factrail hook status` (`/factrail on|off|status`): the switch, and what this session would get.

`on`/`enable`/`1`/`true` and `off`/`disable`/`0`/`false` switch (the plugin stores the answer's
`store.enabled`); an empty argument or `status` reports; anything else reports with the usage
line. The report says which judge this session would get and why, whether the endpoint is
declared local, the fence's lists, where outputs and decisions go, the taint and the last outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Literal

import httpx

from factrail import __version__, runtime
from factrail.hook.fence import merged_taint, request_refs
from factrail.hook.lines import session_trigger
from factrail.hook.options import read_options, resolve_enabled
from factrail.hook.protocol import number, section, stored, text
from factrail.hook.turn import baseline_tokens
from factrail.policy.decide import decide
from factrail.stores import state_url
from factrail.stores.paths import data_root

Switch = Literal["on", "off", "status", "help"]
USAGE = "usage: /factrail on | off | status"


def switch_command(args: str) -> Switch:
    """What `/factrail <args>` asks for."""
    word = args.strip().lower()
    if word in ("on", "enable", "1", "true"):
        return "on"
    if word in ("off", "disable", "0", "false"):
        return "off"
    return "status" if word in ("", "status") else "help"


def _k(tokens: float) -> str:
    return f"{round(tokens / 1000)}k"


def status(request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one `status` request."""
    options = read_options(section(request, "config"))
    settings = options.settings
    command = switch_command(text(request.get("args")) or "")
    write = {"on": True, "off": False}.get(command)
    enabled = resolve_enabled(
        write if write is not None else stored(request, "enabled"), options.enabled_by_default
    )
    scan = merged_taint(stored(request, "taint"), settings.fence().scan(request_refs(request)))
    usage = section(request, "usage")
    window = number(usage.get("window"))
    tokens = number(usage.get("tokens"))
    trigger = session_trigger(options, window)
    baseline = baseline_tokens(request.get("baseline"))
    saved = " (saved)" if write is not None else ""
    endpoint = settings.judge_url or ("none" if settings.judge == "rules" else "default")
    lines = [
        f"factrail {__version__}: {'ON' if enabled else 'OFF'}{saved}"
        f" · judge {settings.judge} · fallback {options.fallback}",
        (
            f"trigger at {_k(trigger.tokens) if trigger.tokens else '?'} tokens"
            f" (min of {options.compact_at_percent:g}% of the window and"
            f" {_k(options.compact_at_tokens)}); compacts past {_k(trigger.tokens * 5 / 6)}"
            f" · context now {_k(tokens) if tokens is not None else '?'}"
            + (f" · last compaction left {_k(baseline)}" if baseline else "")
        ),
        _judge_line(settings, enabled, scan, options.fallback),
        (
            f"endpoint: {endpoint}"
            " · declared "
            + (
                "LOCAL: fenced sessions may be judged"
                if settings.judge_local
                else "NON-LOCAL: fenced sessions get the rules only"
            )
        ),
        (
            f"egress: {settings.egress} · fence: tools {', '.join(settings.fence().tools) or '-'}"
            f" · skills {', '.join(settings.fence().skills) or '-'} · sticky per session"
        ),
        _paths_line(settings.save_outputs, settings.record_decisions, settings),
    ]
    if scan.tainted:
        lines.append(f"session tainted: {scan.detail}")
    last = text(stored(request, "last"))
    if last:
        lines.append(f"last outcome: {last}")
    if command == "help":
        lines.append(USAGE)
    return {"text": "\n".join(lines), "store": {"enabled": write}}


def _judge_line(settings: Any, enabled: bool, scan: Any, fallback: str) -> str:
    if not enabled:
        return "this session would get the built-in summary (switched off)"
    if settings.judge == "rules":
        return "this session would be compacted by the rules (no model; nothing leaves)"
    client = httpx.AsyncClient()
    try:
        choice = runtime.judge(settings, client, fallback=False)
    finally:
        asyncio.run(client.aclose())
    if choice.judge is None:
        if fallback == "summary":
            return f"this session would get the built-in summary (no-key: {choice.reason})"
        return f"this session would be compacted by the rules, no model (no-key: {choice.reason})"
    verdict = decide(taint=scan, local=choice.judge.local)
    if verdict.model:
        return f"this session would be judged by {settings.judge} ({verdict.reason})"
    detail = f": {verdict.detail}" if verdict.detail else ""
    if fallback == "summary":
        return f"this session would get the built-in summary ({verdict.reason}{detail})"
    return f"this session would be compacted by the rules, no model ({verdict.reason}{detail})"


def _paths_line(save: bool, record: bool, settings: Any) -> str:
    store = runtime.output_store(settings) if save else None
    outputs = "off" if not save else (str(store.root) if store is not None else "no cache folder")
    data = data_root()
    decisions = "off" if not record else (str(data / "decisions") if data else "no data folder")
    state = state_url(settings.state_url)
    return f"saved outputs: {outputs} · decision log: {decisions} · state: {state}"
