"""Async judges over httpx (rules, System One, Tev) behind one protocol, and their factory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import httpx

from factrail.judges import systemone, tev
from factrail.judges.base import (
    Judge,
    JudgeConfigError,
    JudgeError,
    JudgeFailure,
    JudgeKind,
    JudgeRound,
)
from factrail.judges.rules import RulesJudge
from factrail.judges.systemone import SystemOneJudge
from factrail.judges.tev import Constraint, TevJudge

if TYPE_CHECKING:
    from factrail.settings import Settings

__all__ = [
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeFailure",
    "JudgeKind",
    "JudgeRound",
    "RulesJudge",
    "SystemOneJudge",
    "TevJudge",
    "configured_judge",
    "make_judge",
]


def make_judge(
    kind: JudgeKind,
    *,
    client: httpx.AsyncClient,
    url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    local: bool = False,
    known: Sequence[str] = (),
    tev_constraint: Constraint = "regex",
) -> Judge:
    """Build the judge of `kind`. `known` lists extra secrets to mask in everything sent.

    `api_key` must be the key for this backend only: it is sent as a bearer to this judge's
    own endpoint and nowhere else.
    """
    if kind == "rules":
        return RulesJudge()
    if kind == "systemone":
        return SystemOneJudge(
            client=client,
            url=url or systemone.DEFAULT_URL,
            model=model or systemone.DEFAULT_MODEL,
            api_key=api_key,
            local=local,
            known=known,
        )
    if not url:
        raise JudgeConfigError("the Tev judge needs a base URL")
    return TevJudge(
        client=client,
        base_url=url,
        model=model or tev.DEFAULT_MODEL,
        api_key=api_key,
        local=local,
        known=known,
        constraint=tev_constraint,
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
