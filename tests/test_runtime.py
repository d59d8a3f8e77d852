"""`factrail.runtime`: the judge and its fallback, the stores and the decision log built from one
`Settings`, and the one construction site of the session compactor."""

from __future__ import annotations

import ast
import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import factrail
from factrail import runtime
from factrail.hook import run_hook
from factrail.judges import JudgeConfigError, RulesJudge, SystemOneJudge
from factrail.session import SessionCompactor
from factrail.settings import Settings
from factrail.stores.decisions import utc_day
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import DAY_SECONDS
from factrail.stores.sqlite_state import SqliteStateStore
from tests.hook.transcripts import session

LOCAL_S1 = "http://127.0.0.1:9/s1"
LOCAL: dict[str, Any] = {"judge": "systemone", "judge_url": LOCAL_S1, "judge_local": True}
"""A System One judge declared local: built without a key."""


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        yield http


@pytest.fixture(autouse=True)
def no_judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FACTRAIL_JUDGE_API_KEY", "FACTRAIL_TEV_API_KEY"):
        monkeypatch.delenv(name, raising=False)


# -- the judge and its fallback ----------------------------------------------------------------


async def test_the_configured_judge_is_built(client: httpx.AsyncClient) -> None:
    choice = runtime.judge(Settings(**LOCAL), client)
    assert isinstance(choice.judge, SystemOneJudge) and choice.judge.local
    assert choice.error is None and choice.reason == "" and choice.required() is choice.judge
    assert isinstance(runtime.judge(Settings(), client).required(), RulesJudge)


async def test_a_judge_that_may_not_be_built_falls_to_the_rules_with_the_reason(
    client: httpx.AsyncClient,
) -> None:
    keyless = Settings(judge="systemone")  # a remote System One needs a key
    choice = runtime.judge(keyless, client)
    assert isinstance(choice.judge, RulesJudge) and choice.reason
    with pytest.raises(JudgeConfigError):
        choice.required()
    bare = runtime.judge(keyless, client, fallback=False)
    assert bare.judge is None and bare.reason == choice.reason
    # a model judge without a client to carry its requests is one that may not be built
    unreachable = runtime.judge(Settings(**LOCAL))
    assert isinstance(unreachable.judge, RulesJudge) and "client" in unreachable.reason


# -- the stores ------------------------------------------------------------------------------


def test_the_state_store_honours_its_bound_and_the_outputs_retention(tmp_path: Path) -> None:
    settings = Settings(
        state_url=f"sqlite:///{tmp_path / 'state.db'}",
        state_max_bytes=123_456,
        outputs_retention_days=3,
    )
    failed: list[str] = []
    store = runtime.state_store(settings, on_error=failed.append)
    try:
        assert isinstance(store, SqliteStateStore)
        assert store.max_bytes == 123_456
        assert store.taint_keep_ms == 3 * DAY_SECONDS * 1000
    finally:
        store.close()
    assert isinstance(runtime.state_store(Settings(state_url="memory://")), MemoryStateStore)


def test_the_hooks_state_store_honours_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`factrail hook compact` opens its store through the runtime, bound and retention
    included."""
    opened: list[dict[str, Any]] = []
    real = runtime.open_state_store

    def spy(url: str, **kwargs: Any) -> Any:
        opened.append({"url": url, **kwargs})
        return real(url, **kwargs)

    monkeypatch.setattr(runtime, "open_state_store", spy)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    monkeypatch.setenv("FACTRAIL_STATE_URL", url)
    monkeypatch.setenv("FACTRAIL_STATE_MAX_BYTES", "654321")
    monkeypatch.setenv("FACTRAIL_OUTPUTS_RETENTION_DAYS", "2")
    request = {
        "protocol": 1,
        "config": {"compactAtTokens": 40_000, "compactAtPercent": 60},
        "session": {"id": "s", "cwd": "/w", "trigger": "manual", "agentId": None},
        "messages": session(),
        "usage": {"tokens": 70_000, "window": 200_000},
        "store": {},
    }
    body = run_hook("compact", json.dumps(request).encode())
    assert body["ok"] is True and body["action"] == "install", body
    assert opened and opened[0]["url"] == url
    assert opened[0]["max_bytes"] == 654_321
    assert opened[0]["taint_keep_seconds"] == 2 * DAY_SECONDS


def test_the_output_store_is_the_configured_one(tmp_path: Path) -> None:
    store = runtime.output_store(Settings(outputs_dir=str(tmp_path / "outputs")))
    assert store is not None and store.root == tmp_path / "outputs"


# -- the decision log ----------------------------------------------------------------------------


async def test_the_decision_log_honours_its_retention(
    tmp_path: Path, client: httpx.AsyncClient
) -> None:
    settings = Settings(**LOCAL, decisions_retention_days=5)
    model = runtime.judge(settings, client).required()
    env = {"XDG_DATA_HOME": str(tmp_path)}
    log = runtime.decision_log(settings, model, env)
    assert log is not None and log.root == tmp_path / "factrail" / "decisions"
    assert log.retention_days == 5
    now = time.time()
    today = utc_day(now)
    log.root.mkdir(parents=True)
    kept, gone = (log.path_for(today - timedelta(days=d)) for d in (4, 6))
    kept.write_text("{}\n")
    gone.write_text("{}\n")
    assert log.append({"session": "s", "decisions": []}, now)
    assert kept.exists() and not gone.exists() and log.path_for(today).exists()
    # only for a model judge, and only when decisions are recorded
    assert runtime.decision_log(settings, RulesJudge(), env) is None
    off = settings.model_copy(update={"record_decisions": False})
    assert runtime.decision_log(off, model, env) is None


async def test_the_compactor_gets_the_decision_log_and_the_given_kind(
    client: httpx.AsyncClient,
) -> None:
    class Special(SessionCompactor):
        pass

    settings = Settings(**LOCAL, decisions_retention_days=9)
    model = runtime.judge(settings, client).required()
    built = runtime.compactor(
        settings, judge=model, state=MemoryStateStore(), outputs=None, kind=Special
    )
    try:
        assert type(built) is Special and built.judge is model
        assert built.judging.decisions is not None
        assert built.judging.decisions.retention_days == 9
        assert built.options == settings.engine_options()
    finally:
        built.close()
    rules = runtime.compactor(settings, judge=RulesJudge(), state=MemoryStateStore(), outputs=None)
    try:
        assert type(rules) is SessionCompactor and rules.judging.decisions is None
    finally:
        rules.close()


# -- one construction site -------------------------------------------------------------------


def _compactor_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """`SessionCompactor` and every class of the package that derives from it."""
    names = {"SessionCompactor"}
    grew = True
    while grew:
        grew = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names:
                    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                             for b in node.bases}  # fmt: skip
                    if bases & names:
                        names.add(node.name)
                        grew = True
    return names


def test_the_session_compactor_is_constructed_in_the_runtime_only() -> None:
    package = Path(factrail.__file__).parent
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in package.rglob("*.py")}
    classes = _compactor_classes(trees)
    assert "ForcedCompactor" in classes  # the hook's subclass is seen
    sites: set[str] = set()
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = {
                n.id if isinstance(n, ast.Name) else n.attr
                for n in ast.walk(node.func)
                if isinstance(n, ast.Name | ast.Attribute)
            }
            if called & classes:
                sites.add(str(path.relative_to(package.parent)))
    assert sites <= {"factrail/runtime.py"}, sites
