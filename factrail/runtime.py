"""The engine put together from one `Settings`: the judge with its fallback, the state store, the
output store, the decision log and the session compactor.

The gateway, the hook, `factrail compact` (`compact_transcript`) and `eval --sim` build these
here and nowhere else, so each honours the same settings (retention, byte bounds, the decision
log's conditions). A caller with needs of its own says so through the settings it passes (a
copy with `state_url="memory://"`, `record_decisions=False`, …) or an explicit argument (the
engine options, a given output store). This module sits above the session, the judges, the
stores and the settings, and below the gateway, the hook, the API and the eval, none of which it
imports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from factrail.judges import JudgeConfigError, RulesJudge, make_judge
from factrail.judges.base import Judge
from factrail.session import EngineOptions, SessionCompactor
from factrail.settings import Settings
from factrail.stores import open_state_store, state_url
from factrail.stores.decisions import DecisionLog
from factrail.stores.outputs import DAY_SECONDS, OutputStore
from factrail.stores.paths import data_root
from factrail.stores.state import StateStore

__all__ = [
    "JudgeChoice",
    "compactor",
    "decision_log",
    "judge",
    "output_store",
    "state_store",
]

Observe = Callable[[str, float], None]


@dataclass(frozen=True, slots=True)
class JudgeChoice:
    """The judge a session gets, and why the configured one may not be built (if so)."""

    judge: Judge | None
    """The configured judge; when it may not be built, the rules, or None when the caller
    asked for no fallback."""
    error: JudgeConfigError | None = None
    """Why the configured judge may not be built (None: it was)."""

    @property
    def reason(self) -> str:
        """`error` in words ("" when the configured judge was built)."""
        return "" if self.error is None else str(self.error)

    def required(self) -> Judge:
        """The configured judge; raises its `JudgeConfigError` when it may not be built."""
        if self.error is not None:
            raise self.error
        assert self.judge is not None
        return self.judge


def judge(
    settings: Settings, client: httpx.AsyncClient | None = None, *, fallback: bool = True
) -> JudgeChoice:
    """The judge `settings` name, its requests carried by `client`; when it may not be built
    (no key, no URL, no client for a model judge), the rules with the reason, or, with
    `fallback=False`, no judge and the reason (for a caller that hands over to a fallback of
    its own)."""
    if settings.judge == "rules":
        return JudgeChoice(RulesJudge())
    try:
        if client is None:
            raise JudgeConfigError(f"the {settings.judge} judge needs an HTTP client")
        return JudgeChoice(configured_judge(settings, client))
    except JudgeConfigError as err:
        return JudgeChoice(RulesJudge() if fallback else None, err)


def state_store(settings: Settings, *, on_error: Callable[[str], None] | None = None) -> StateStore:
    """The state store `settings.state_url` names (or the default), bounded by
    `state_max_bytes` and keeping tainted records as long as the saved outputs
    (`outputs_retention_days`); `on_error(operation)` hears of every failed store call."""
    return open_state_store(
        state_url(settings.state_url),
        max_bytes=settings.state_max_bytes,
        taint_keep_seconds=settings.outputs_retention_days * DAY_SECONDS,
        on_error=on_error,
    )


def output_store(settings: Settings) -> OutputStore | None:
    """The saved-output store as configured (None when no cache folder is usable)."""
    return settings.output_store()


def decision_log(
    settings: Settings, judged_by: Judge, env: Mapping[str, str] | None = None
) -> DecisionLog | None:
    """The decision log under the data folder, keeping `decisions_retention_days` days: only
    for a model judge and when `record_decisions` is set (None otherwise, or with no data
    folder)."""
    if not settings.record_decisions or judged_by.kind == "rules":
        return None
    root = data_root(env)
    if root is None:
        return None
    return DecisionLog(root / "decisions", settings.decisions_retention_days)


def compactor(
    settings: Settings,
    *,
    judge: Judge,
    state: StateStore,
    outputs: OutputStore | None,
    options: EngineOptions | None = None,
    kind: type[SessionCompactor] = SessionCompactor,
    clock: Callable[[], float] = time.time,
    observe_preparation: Observe | None = None,
) -> SessionCompactor:
    """The session compactor (`kind`: `SessionCompactor` or a subclass) over `state`,
    `outputs` and `judge`, with the decision log `decision_log` gives, under `options` (default:
    the settings' engine options, whose notes name the gateway's outputs route).
    `observe_preparation(outcome, seconds)` hears of every background preparation."""
    return kind(
        settings.engine_options() if options is None else options,
        state=state,
        outputs=outputs,
        judge=judge,
        decisions=decision_log(settings, judge),
        clock=clock,
        observe_preparation=observe_preparation,
    )


def configured_judge(settings: Settings, client: httpx.AsyncClient) -> Judge:
    """The judge the settings name (`FACTRAIL_JUDGE`, `_URL`, `_MODEL`, `_API_KEY`, `_LOCAL`,
    `FACTRAIL_TEV_CONSTRAINT`); raises JudgeConfigError when it may not be built."""
    return make_judge(
        settings.judge,
        client=client,
        url=settings.judge_url or None,
        model=settings.judge_model or None,
        api_key=settings.judge_api_key.get_secret_value() or None,
        local=settings.judge_local,
        known=settings.known_secrets(),
        tev_constraint=settings.tev_constraint,
    )
