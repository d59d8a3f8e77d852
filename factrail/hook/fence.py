"""`factrail hook taint` (`tool.call`, `skill.prompt`), and the fence's reading of the plugin's
requests: the one matcher of `factrail.policy.taint` (`TaintFence.taints` / `scan`), with the
sticky record kept in the plugin's store under `taint:<session>`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from factrail.hook.options import read_options
from factrail.hook.protocol import now_ms, section, stored, text
from factrail.policy.taint import SKILL_TOOL, TaintScan, ToolRef, merge_taint, taint_write


def request_refs(request: Mapping[str, Any]) -> list[ToolRef]:
    """The `tools` list a request carries (`[{tool, skill}]`), read leniently: a scalar name is
    its text, anything else names nothing."""
    tools = request.get("tools")
    refs: list[ToolRef] = []
    for item in tools if isinstance(tools, list) else []:
        if not isinstance(item, dict):
            continue
        refs.append(ToolRef(_scalar(item.get("tool")) or "", _scalar(item.get("skill"))))
    return refs


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
        refs = [ToolRef(tool, skill)]
    elif skill:
        refs = [ToolRef(SKILL_TOOL, skill)]  # a skill expanded as a slash command
    else:
        refs = []
    record = stored(request, "taint")
    scan = merged_scan(None, refs, request)
    return {"taint": taint_write(record, scan, now_ms(request))}
