"""The rules judge: asks no model and sends nothing; every candidate falls to the rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from factrail.core.plan import JudgeRequest
from factrail.judges.base import JudgeRound


class RulesJudge:
    """A judge that answers nothing, so `Plan.decide` reduces every unpinned result."""

    kind: Literal["rules"] = "rules"
    model = "rules"
    local = True
    endpoint = ""
    known_secrets: tuple[str, ...] = ()

    async def ask(self, requests: Sequence[JudgeRequest], *, deadline: float) -> JudgeRound:
        """An empty round: nothing is sent."""
        return JudgeRound()
