"""The rules judge asks nothing and sends nothing."""

from __future__ import annotations

import httpx
import respx

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.core.plan import build_plan
from factrail.judges import RulesJudge, make_judge
from tests.options import plan_options


async def test_rules_judge_sends_nothing_and_everything_falls_to_rules(
    respx_mock: respx.MockRouter,
) -> None:
    msgs = [
        Message("user", "go"),
        Message("assistant", "", tool_uses=[ToolUse("u1", "Read", {"file_path": "/a/b"})]),
        Message("user", tool_results=[ToolResult("u1", "x" * 5000)]),
        Message("assistant", "done"),
    ]
    plan = build_plan(msgs, plan_options(preserve_recent=1), {}, set())
    async with httpx.AsyncClient() as client:
        judge = make_judge("rules", client=client)
        result = await judge.ask(plan.requests, deadline=0.0)
    assert isinstance(judge, RulesJudge)
    assert (judge.kind, judge.local, judge.endpoint) == ("rules", True, "")
    assert (result.answers, result.errors, result.requests, result.redacted) == ({}, [], 0, 0)
    assert not respx_mock.calls
    assert plan.decide(result.answers).actions == {"u1": "drop_result"}
