"""`factrail hook taint` (`tool.call`, `skill.prompt`), and the fence's reading of the plugin's
requests: the one call model and matcher of `factrail.policy` (`call_ref`, `TaintFence.scan`),
with the sticky record kept in the plugin's store under `taint:<session>`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from factrail.hook.options import read_options
from factrail.hook.protocol import now_ms, section, stored, text
from factrail.policy.calls import call_ref, server_values
from factrail.policy.taint import SKILL_TOOL, TaintScan, ToolRef, merge_taint, taint_write


def request_refs(request: Mapping[str, Any]) -> list[ToolRef]:
    """The `tools` list a request carries (`[{tool, skill}]`, optionally a `server` and the
    call's `input`), read leniently: a scalar name is its text, anything else names nothing."""
    tools = request.get("tools")
    refs: list[ToolRef] = []
    for item in tools if isinstance(tools, list) else []:
        if isinstance(item, dict):
            refs.append(_ref(_scalar(item.get("tool")), _scalar(item.get("skill")), item))
    return refs


def _ref(tool: str | None, skill: str | None, call: Mapping[str, Any]) -> ToolRef:
    """A call as the fence reads it: the servers named beside it (`server`, `server_name`,
    any key that speaks of a server), the servers and tools its `input` names, and every
    key and string of its input."""
    server = _scalar(call.get("server"))
    servers = list(dict.fromkeys([*([server] if server else []), *server_values(call)]))
    ref = call_ref(tool or "", call.get("input"), servers)
    return ToolRef(ref.tool, skill or ref.skill, ref.server, ref.qualifiers, ref.held)


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def merged_taint(record: Any, scan: TaintScan) -> TaintScan:
    """A scan merged with the plugin's stored record: once tainted, always tainted."""
    return merge_taint(record, scan)


def merged_scan(record: Any, refs: Sequence[ToolRef], request: Mapping[str, Any]) -> TaintScan:
    """The fence's verdict on `refs` under the request's options, merged with the record."""
    fence = read_options(section(request, "config")).settings.fence()
    return merge_taint(record, fence.scan(refs))


def taint(request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one `taint` request: the record to store, the first time only."""
    tool = text(request.get("tool"))
    skill = text(request.get("skill"))
    if tool:
        refs = [_ref(tool, skill, request)]
    elif skill:
        refs = [ToolRef(SKILL_TOOL, skill)]  # a skill expanded as a slash command
    else:
        refs = []
    record = stored(request, "taint")
    scan = merged_scan(None, refs, request)
    return {"taint": taint_write(record, scan, now_ms(request))}
