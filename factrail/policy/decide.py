"""Which judge a compaction may use: switch, then key, then taint fence, then declared locality."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from factrail.policy.options import Fallback
from factrail.policy.taint import TaintScan

Judge = Literal["model", "rules", "builtin"]
Reason = Literal["switched-off", "no-key", "tainted", "ok-local", "ok", "ok-rules"]
OK_RULES: Reason = "ok-rules"
"""Used by callers when the model judge failed (or reduced less) and the rules finished."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judge to use, why, and (for fenced sessions) which calls fenced it."""

    judge: Judge
    reason: Reason
    detail: str | None = None


def decide(
    *, enabled: bool, credentials: bool, taint: TaintScan, local: bool, fallback: Fallback
) -> Verdict:
    """Switched off → builtin; no key → fallback; fenced and not declared local → fallback;
    fenced but local → model (`ok-local`, auditable); else model."""
    if not enabled:
        return Verdict("builtin", "switched-off")
    substitute: Judge = "builtin" if fallback == "summary" else "rules"
    if not credentials:
        return Verdict(substitute, "no-key")
    if taint.tainted:
        if local:
            return Verdict("model", "ok-local", taint.detail)
        return Verdict(substitute, "tainted", taint.detail)
    return Verdict("model", "ok")
