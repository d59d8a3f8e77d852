"""End to end: Claude Code (pinned in `plugin/node_modules`) with the factrail plugin enabled, in
print mode against the scripted Anthropic endpoint on loopback (no internet), runs a tool loop
long enough to compact.

What compacts: Claude Code's own auto-compaction (`trigger: auto`), brought within reach by
`CLAUDE_CODE_AUTO_COMPACT_WINDOW` (100k, its floor) and `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`; the
plugin's `session.compact` hook runs `factrail hook compact` (this checkout's binary, set as the
plugin's `binary` option) and installs its transcript. The plugin's own turn-end compaction
cannot run in print mode: Claude Code 2.1.332 refuses `$.session.compact()` in a headless
session (`not available in a headless (-p / SDK) session yet`), and a print session's one turn
ends with its answer anyway.

The fenced call is a real tool: a stand-in e-mail gateway plugin, written by this test,
registers `search` (so Claude Code lists `mcp__email-gateway__search`) and answers it; the
scripted endpoint calls it at step 3. A fake System One judge on loopback counts the requests
it gets. Sessions: direct (no factrail), fenced with a remote judge, fenced with the judge
declared local, and a clean one with the remote judge (it shows the judge is reachable, so the
fenced session's zero is the fence's doing).
"""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.bills import Session
from tests.integration.claude_code import CLAUDE, run_session
from tests.integration.processes import ROOT, start_fake, stop

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not CLAUDE.exists(),
        reason="Claude Code is not pinned in plugin/node_modules (run `make node-deps`)",
    ),
]

BINARY = ROOT / ".venv" / "bin" / "factrail"
STEPS = 20
FENCED = "mcp__email-gateway__search"
FENCED_STEP = 3
AUTO_COMPACT = {
    # Claude Code compacts past 40% of a 100k window; the session reaches ~31k by step 12
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "40",
}
OPTIONS = {"compactAtTokens": 8000}
"""The plugin's userConfig (as `--settings` pluginConfigs): the trigger set low."""

GATEWAY_MANIFEST = {
    "name": "email-gateway",
    "version": "0.0.0",
    "description": "A stand-in e-mail gateway for factrail's end-to-end test.",
}
GATEWAY_MODULE = """import type { Register } from 'claude-code'

export const register: Register = (on) => {
  on('session.start', async ($, e, next) => {
    await $.tool.register({
      name: 'search',
      description: 'Searches the mailbox.',
      inputSchema: { type: 'object', properties: { query: { type: 'string' } } },
      isDeferred: false,
    })
    return next(e)
  })
  on('tool.run', { tool: 'mcp__email-gateway__search' }, async () =>
    ({ result: 'From: ops@example.test\\nSubject: key rotation\\nThe release key rotates soon.' }))
}
"""


def email_gateway(root: Path) -> Path:
    """The stand-in e-mail gateway plugin's folder."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / "hooks").mkdir()
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(GATEWAY_MANIFEST))
    (root / "hooks" / "hooks.json").write_text(json.dumps({"modules": ["./gateway.ts"]}))
    (root / "hooks" / "gateway.ts").write_text(GATEWAY_MODULE)
    return root


@dataclass
class Run:
    session: Session
    last: dict[str, Any]
    """The last main request's body, as the endpoint received it."""
    store: dict[str, Any]
    """The factrail plugin's own store (`taint:`, `baseline:`, `last`)."""
    judged: int
    """Requests the judge received during the session."""
    project: Path


@dataclass
class Stack:
    endpoint: str
    judge: str
    gateway: Path
    work: Path
    runs: int = 0

    def run(self, *, factrail: bool, fenced: bool = True, **env: str) -> Run:
        self.runs += 1
        work = self.work / f"run-{self.runs}"
        httpx.post(f"{self.judge}/_reset", timeout=10).raise_for_status()
        args = ["--plugin-dir", str(self.gateway)]
        environ = {"CLAUDE_CODE_ENABLE_FUNCTION_HOOKS": "1"}
        if factrail:
            options = {**OPTIONS, "binary": str(BINARY)}
            settings = {"pluginConfigs": {"factrail@inline": {"options": options}}}
            args += ["--plugin-dir", str(ROOT / "plugin"), "--settings", json.dumps(settings)]
            environ |= {
                **AUTO_COMPACT,
                "XDG_DATA_HOME": str(work / "data"),
                "XDG_CACHE_HOME": str(work / "cache"),
                "FACTRAIL_JUDGE": "systemone",
                "FACTRAIL_JUDGE_URL": f"{self.judge}/v1/systemone",
                "FACTRAIL_JUDGE_API_KEY": "judge-" + secrets.token_hex(12),
                "FACTRAIL_JUDGE_LOCAL": "false",
                **env,
            }
        script = {"fenced": FENCED, "fenced_step": FENCED_STEP} if fenced else {}
        session = run_session(
            self.endpoint, self.endpoint, STEPS, work, args=args, env=environ, script=script
        )
        last = httpx.get(f"{self.endpoint}/_last", timeout=10).json()
        stores = list((work / "home" / ".claude" / "plugins" / "store").glob("factrail_*.json"))
        store = json.loads(stores[0].read_text()) if stores else {}
        judged = len(httpx.get(f"{self.judge}/_records", timeout=10).json())
        return Run(session, last, store, judged, work / "project")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("plugin-e2e")
    gateway = email_gateway(work / "email-gateway")
    endpoint, fake = start_fake("tests.integration.scripted_anthropic:app")
    try:
        judge, judge_proc = start_fake("tests.integration.fake_judges:systemone")
        try:
            yield Stack(endpoint, judge, gateway, work)
        finally:
            stop(judge_proc)
    finally:
        stop(fake)


@pytest.fixture(scope="module")
def direct(stack: Stack) -> Run:
    return stack.run(factrail=False)


@pytest.fixture(scope="module")
def fenced(stack: Stack) -> Run:
    return stack.run(factrail=True)


@pytest.fixture(scope="module")
def fenced_local(stack: Stack) -> Run:
    return stack.run(factrail=True, FACTRAIL_JUDGE_LOCAL="true")


@pytest.fixture(scope="module")
def clean(stack: Stack) -> Run:
    return stack.run(factrail=True, fenced=False)


# -- what the transcript says -------------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def written(run: Run) -> list[Any]:
    """What the agent wrote (its texts and tool calls, in order) and what the user typed, the
    session's own folder and planted token read as placeholders."""
    raw = json.dumps(run.last["messages"]).replace(str(run.project), "<project>")
    messages = json.loads(raw.replace(run.session.token, "<token>"))
    out: list[Any] = []
    for m in messages:
        for b in _blocks(m):
            reminder = "<system-reminder>" in b.get("text", "")
            if m["role"] == "assistant" and b["type"] == "text":
                out.append(("said", b["text"]))
            elif b["type"] == "tool_use":
                out.append(("called", b["id"], b["name"], b["input"]))
            elif m["role"] == "user" and b["type"] == "text" and not reminder:
                out.append(("typed", b["text"]))
    return out


def results(body: dict[str, Any]) -> dict[str, str]:
    """Each tool result's text, by its call's id."""
    out: dict[str, str] = {}
    for m in body["messages"]:
        for b in _blocks(m):
            if b["type"] == "tool_result":
                content = b.get("content")
                parts = [content] if isinstance(content, str) else content or []
                text = "\n".join(p if isinstance(p, str) else p.get("text", "") for p in parts)
                out[b["tool_use_id"]] = text
    return out


def completed(run: Run) -> None:
    """Claude Code finished cleanly, every request was valid, and the fact reached the answer."""
    s = run.session
    assert s.returncode == 0, s.stderr
    assert s.result.get("is_error") is False, s.result
    assert s.rejected == [], s.rejected
    assert s.token in s.result["result"]


def compactions(run: Run) -> list[int]:
    """The main requests that rewrote earlier messages (the endpoint saw a compacted transcript
    there), by their index among the main requests."""
    return [k for k, r in enumerate(run.session.main) if r.get("first_diff") is not None]


# -- the tests -----------------------------------------------------------------------------------


def test_the_direct_session_never_compacts(direct: Run) -> None:
    completed(direct)
    assert compactions(direct) == []
    assert len(direct.session.main) == STEPS + 1
    assert direct.judged == 0


def test_the_endpoint_sees_the_compacted_transcript_and_the_session_carries_on(
    fenced: Run, direct: Run
) -> None:
    completed(fenced)
    done = compactions(fenced)
    assert done, "no request after a compaction"
    # the session carried on after it: more main requests followed the compaction
    assert len(fenced.session.main) > done[0] + 3
    assert fenced.store["last"].startswith("factrail: kept "), fenced.store
    # early results are re-run notes and kept fact lines now; the late ones are untouched
    now, then = results(fenced.last), results(direct.last)
    reduced = [uid for uid, text in now.items() if "[factrail omitted" in text]
    assert "toolu_scripted_000" in reduced and len(reduced) >= 3, now
    assert any("re-run" in now[uid] or "factrail outputs get" in now[uid] for uid in reduced)
    untouched = [uid for uid in now if uid in then and now[uid] == then[uid]]
    assert untouched, "every result changed"
    # nothing the user or the agent wrote changed: the same texts and calls, in order
    before, after = written(direct), written(fenced)
    assert after[: len(before)] == before


def test_a_fenced_call_keeps_every_judge_request_away(fenced: Run) -> None:
    completed(fenced)
    assert compactions(fenced)
    taint = [v for k, v in fenced.store.items() if k.startswith("taint:")]
    assert len(taint) == 1 and taint[0]["tainted"] is True and taint[0]["sample"] == [FENCED]
    assert "judge rules (rules:tainted)" in fenced.store["last"], fenced.store
    assert fenced.judged == 0


def test_the_same_session_reaches_the_judge_once_it_is_declared_local(fenced_local: Run) -> None:
    completed(fenced_local)
    assert compactions(fenced_local)
    assert "(ok-local)" in fenced_local.store["last"], fenced_local.store
    assert fenced_local.judged > 0


def test_without_the_fenced_call_the_remote_judge_is_asked(clean: Run) -> None:
    completed(clean)
    assert compactions(clean)
    assert not any(k.startswith("taint:") for k in clean.store)
    assert "(ok)" in clean.store["last"], clean.store
    assert clean.judged > 0
