"""Which judge a compaction may use: the taint fence, then declared locality."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from factrail.policy.taint import TaintScan

Reason = Literal["rules", "tainted", "ok-local", "ok", "ok-rules"]
"""`rules`: no model judge is configured; `ok-rules`: the model judge failed (or reduced less)
and the rules finished."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the model judge may be asked, why, and which calls fenced the session."""

    model: bool
    reason: Reason
    detail: str | None = None


def decide(*, taint: TaintScan, local: bool) -> Verdict:
    """Fenced and not declared local → rules; fenced but local → model (`ok-local`, auditable);
    else model."""
    if taint.tainted:
        if local:
            return Verdict(True, "ok-local", taint.detail)
        return Verdict(False, "tainted", taint.detail)
    return Verdict(True, "ok")
