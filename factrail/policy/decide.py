"""Which judge a compaction may use: the taint fence, then declared locality."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from factrail.policy.taint import TaintScan

Reason = Literal["rules", "tainted", "unproven", "ok-local", "ok", "ok-rules"]
"""`rules`: no model judge is configured; `tainted`: the session touched a fenced tool;
`unproven`: factrail cannot prove it did not (the store failed, or the transcript continues one
not seen from its start); `ok-rules`: the model judge failed (or reduced less) and the rules
finished."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the model judge may be asked, why, and which calls fenced the session."""

    model: bool
    reason: Reason
    detail: str | None = None


def decide(*, taint: TaintScan, local: bool) -> Verdict:
    """Tainted or unproven and not declared local → rules; declared local → model (`ok-local`,
    auditable); a session proven clean → model. The fence fails closed."""
    if taint.fenced:
        if local:
            return Verdict(True, "ok-local", taint.detail)
        return Verdict(False, "tainted" if taint.tainted else "unproven", taint.detail)
    return Verdict(True, "ok")
