"""Async judges over httpx (rules, System One, Tev) behind one protocol, and their factory."""

from __future__ import annotations

from collections.abc import Sequence

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
