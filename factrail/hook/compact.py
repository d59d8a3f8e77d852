"""`factrail hook compact` (`session.compact`): the gateway's compaction step over Claude Code's
own transcript.

The same `SessionCompactor` as the gateway runs it (rules or the configured judge under the
fence, the rails under pressure, saved outputs, the decision log), over the session's state in
factrail's own state store (keyed by a hash of Claude Code's session id), so what an earlier
compaction decided stays frozen. Claude Code asked for this compaction:

- `manual` (`/compact`) and `auto` (Claude Code's own threshold) run whatever the lines and the
  cost say, since the alternative is the built-in summary; a transcript below the soft line is
  aimed at as if its own size were the trigger;
- `plugin` (the plugin's `turn` said it is due) runs under the gateway's cost rule: past the
  danger line always; short of it only when it pays back the prompt cache it breaks, the cache
  being warm at the end of a turn, or cold for the cache-warm nudge (`session.cause`);
- `precompute` is skipped, and a subagent's own compaction is left to the built-in one.

The answer installs the compacted transcript (`{"keep": i}` for every message left as it
was), or hands over to the built-in summary (`builtin`) or to nothing (`skip`), with the store
writes the plugin makes: the sticky taint record and the last outcome.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from factrail import runtime
from factrail.core.formats import hook as hook_format
from factrail.core.formats.base import FormatError, WireDocument
from factrail.core.model import Message, transcript_tokens
from factrail.hook.fence import merged_taint
from factrail.hook.lines import MODEL, session_trigger
from factrail.hook.options import HookOptions, read_options, resolve_enabled
from factrail.hook.protocol import HookError, now_ms, number, section, stored, text
from factrail.judges.base import Judge
from factrail.policy.cost import lifetime
from factrail.policy.decide import decide
from factrail.policy.provenance import Evidence, continued
from factrail.policy.taint import TaintScan, merge_taint, taint_write, tool_refs
from factrail.session import SessionCompactor, Turn, TurnResult
from factrail.session.gate import CostGate
from factrail.stores.state import SessionState, StateStore

SESSION_PREFIX = "claude-code:"
Done = Callable[..., dict[str, Any]]
CAUSE_WARM = "cache-warm"
"""`session.cause` of a compaction the plugin's cache-warm nudge started."""


class ForcedGate(CostGate):
    """The cost gate of a compaction the client asked for: past the soft line it runs whatever
    it costs (the built-in summary is the alternative, and breaks the cache too)."""

    def must(self, turn: Turn) -> bool:
        return True


class ForcedCompactor(SessionCompactor):
    """The session step, for a compaction the client asked for (`ForcedGate`)."""

    gate_type = ForcedGate


@dataclass(frozen=True, slots=True)
class Request:
    """What a `compact` request says, read and checked."""

    session: str
    model: str
    """The session's model, when the plugin says (its prompt-cache prices); else ""."""
    trigger: str
    agent: str | None
    cause: str | None
    raw: list[Any]
    messages: Sequence[Message]
    doc: WireDocument
    tokens: float | None
    window: float | None
    record: Any
    """The sticky taint record the plugin's store holds for the session."""


def read(request: Mapping[str, Any]) -> Request:
    """The request's fields; a malformed message list is a `HookError`."""
    session = section(request, "session")
    raw = request.get("messages")
    if not isinstance(raw, list):
        raise HookError("messages: expected a JSON array")
    try:
        doc = hook_format.parse(raw)
    except FormatError as err:
        raise HookError(f"messages: {err}") from None
    usage = section(request, "usage")
    return Request(
        session=text(session.get("id")) or "unknown",
        model=text(session.get("model")) or MODEL,
        trigger=text(session.get("trigger")) or "auto",
        agent=text(session.get("agentId")) or None,
        cause=text(session.get("cause")),
        raw=raw,
        messages=doc.messages,
        doc=doc,
        tokens=number(usage.get("tokens")),
        window=number(usage.get("window")),
        record=stored(request, "taint"),
    )


def state_key(session: str) -> str:
    """The state store's key of a Claude Code session (never its id in clear)."""
    return SESSION_PREFIX + hashlib.sha256(session.encode("utf-8")).hexdigest()[:32]


def compact(request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one `compact` request."""
    req = read(request)
    options = read_options(section(request, "config"))
    now = now_ms(request)
    scan = merged_taint(req.record, options.settings.fence().scan(tool_refs(req.messages)))
    taint_out = taint_write(req.record, scan, now)

    def done(action: str, reason: str, log: str, **more: Any) -> dict[str, Any]:
        toast = more.pop("toast", False)
        last = None if action == "skip" and reason in ("precompute",) else log
        return {
            "action": action,
            "reason": reason,
            "log": log,
            "toast": bool(toast),
            "store": {"taint": taint_out, "last": last, **more.pop("store", {})},
            **more,
        }

    if req.agent:
        return done("builtin", "subagent", "factrail: subagent compaction left to the engine")
    if req.trigger == "precompute":
        return done("skip", "precompute", "factrail: precompute compaction left to the engine")
    if not resolve_enabled(stored(request, "enabled"), options.enabled_by_default):
        return done("builtin", "switched-off", "factrail: built-in summary (switched off)")
    return asyncio.run(_run(req, options, scan, now, done))


async def _run(
    req: Request, options: HookOptions, scan: TaintScan, now: int, done: Done
) -> dict[str, Any]:
    settings = options.settings
    if settings.judge != "rules" and options.fallback == "summary":
        # the fence first (the judge is local only as the settings declare it): a fenced
        # session says so, whether or not the judge has a key
        verdict = decide(taint=_fenced(req, scan), local=settings.judge_local)
        if not verdict.model:
            detail = f": {verdict.detail}" if verdict.detail else ""
            return done(
                "builtin",
                verdict.reason,
                f"factrail: built-in summary ({verdict.reason}{detail})",
                toast=verdict.reason == "tainted",
            )
    async with httpx.AsyncClient() as client:
        # `summary` hands over to the built-in summary, not the rules, when no judge may be built
        choice = runtime.judge(settings, client, fallback=options.fallback == "rules")
        if choice.judge is None:
            return done(
                "builtin", "no-key", f"factrail: built-in summary (no-key: {choice.reason})"
            )
        judge, prefix = choice.judge, "" if choice.error is None else "rules:no-key"
        result, forced = await _compact(req, options, judge, now)
    if result.outcome != "compacted" or result.document is None:
        if forced:
            return done(
                "builtin",
                "below-gate",
                "factrail: built-in summary (nothing the rails could reduce)",
            )
        tokens = round(req.tokens) if req.tokens else result.tokens_before
        return done(
            "skip",
            "declined",
            f"factrail: not compacting at {tokens} tokens: not due, or it would not pay back"
            " the prompt cache it breaks (held until the session grows by the re-arm gap)",
            store={"baseline": {"tokens": tokens, "at": now}},
        )
    messages, kept = _answer_messages(req.raw, result.document)
    reason = _reason(result, prefix)
    reduction = 1 - result.tokens_after / result.tokens_before if result.tokens_before else 0.0
    log = (
        f"factrail: kept {kept}/{len(messages)} messages verbatim, no summary —"
        f" {reduction:.0%} reduction ({result.tokens_before} → {result.tokens_after} tokens);"
        f" {result.reduced} result(s) reduced, {result.saved} saved; tier {result.tier};"
        f" judge {result.judge} ({reason}); {result.judge_requests} request(s)"
    )
    return done(
        "install",
        reason,
        log,
        messages=messages,
        toast=req.trigger == "manual" or reason.endswith("tainted"),
    )


def _fenced(req: Request, scan: TaintScan) -> TaintScan:
    """The scan as `decide` reads it: a transcript that continues the client's own compaction
    cannot prove it is clean."""
    why = continued(None, req.messages)
    if scan.tainted or why is None:
        return scan
    return TaintScan(unproven=why)


async def _compact(
    req: Request, options: HookOptions, judge: Judge, now: int
) -> tuple[TurnResult, bool]:
    """Run the session step; whether it was forced."""
    settings = options.settings
    forced = req.trigger != "plugin"
    lines = session_trigger(options, req.window)
    store = runtime.state_store(settings)
    key = state_key(req.session)
    try:
        estimate = transcript_tokens(req.messages)
        extra = max(0, round(req.tokens) - estimate) if req.tokens else 0
        size = estimate + extra
        trigger = lines.tokens if lines.tokens > 0 else size
        if forced:
            trigger = max(1, min(trigger, size))  # below the soft line: aim as if at the trigger
        tuned = settings.model_copy(
            update={
                "trigger_tokens": trigger,
                "trigger_percent": 0.0,
                "trigger_by_model": {},
                # keyed "": the window Claude Code reports holds for whatever the model
                "context_windows": {MODEL: round(req.window)} if req.window else {},
                # Claude Code's models bill by Anthropic's prompt-cache prices
                "price_profile": "anthropic"
                if settings.price_profile == "auto"
                else settings.price_profile,
            }
        )
        _prepare_state(store, key, req, forced)
        # the cache-warm nudge fires just before the provider's cache expires: the next request
        # finds it cold, so the step costs this compaction as on a cold cache
        ttl = lifetime(settings.cache_ttl_s, options.ttl_s)
        ahead = ttl + 1 if req.cause == CAUSE_WARM else 0.0
        compactor = runtime.compactor(
            tuned,
            judge=judge,
            state=store,
            outputs=runtime.output_store(tuned) if tuned.save_outputs else None,
            options=tuned.engine_options(outputs_route=None),
            kind=ForcedCompactor if forced else SessionCompactor,
            clock=lambda: time.time() + ahead,
        )
        try:
            result = await compactor.compact(
                key,
                req.doc,
                model=req.model,
                extra_tokens=extra,
                evidence=Evidence(continued=continued(None, req.messages)),
                cache_ttl_s=options.ttl_s,  # `cacheTtlSeconds`: an hour prices writes at 2x
            )
        finally:
            compactor.close()
    finally:
        store.close()
    return result, forced


def _prepare_state(store: StateStore, key: str, req: Request, forced: bool) -> None:
    """What the step reads of the session that only the plugin knows: the sticky taint its
    store holds (a call the built-in summary has since absorbed). Saving stamps the session as
    seen now, so the step finds the provider's cache warm, as it is at the end of the turn that
    asked. A compaction the client asked for is not held back by the last one's re-arm gap."""
    state, answered = store.fetch(key)
    if not answered:
        return
    state = state or SessionState(plan={})
    if _sticky(req.record) and not _sticky(state.taint):
        state.taint = dict(req.record)
    if forced:
        state.baseline_tokens = None
    try:
        store.save(key, state)
    except Exception:  # a refinement: the step runs on what the store has
        return


def _sticky(record: Any) -> bool:
    return merge_taint(record, TaintScan()).tainted


def _answer_messages(raw: list[Any], emitted: Any) -> tuple[list[Any], int]:
    """The answer's message list: `{"keep": i}` for every message left as it was (the very
    object the request held), else the message rebuilt from its fields, without a `handle`;
    and how many were kept."""
    out: list[Any] = []
    kept = 0
    for i, (before, after) in enumerate(zip(raw, emitted, strict=True)):
        if after is before:
            out.append({"keep": i})
            kept += 1
        else:
            out.append(_built(after))
    return out, kept


def _built(message: Mapping[str, Any]) -> dict[str, Any]:
    uses = []
    for use in message.get("toolUses") or []:
        item: dict[str, Any] = {
            "tool_use_id": use.get("tool_use_id", ""),
            "tool": use.get("tool", ""),
            "input": use.get("input") if isinstance(use.get("input"), dict) else {},
        }
        if isinstance(use.get("text"), str):
            item["text"] = use["text"]
        if use.get("isError") is True:
            item["isError"] = True
        uses.append(item)
    built: dict[str, Any] = {
        "role": "assistant" if message.get("role") == "assistant" else "user",
        "text": message.get("text") if isinstance(message.get("text"), str) else "",
        "toolUses": uses,
    }
    results = [
        {
            "tool_use_id": r.get("tool_use_id", ""),
            "text": r.get("text") if isinstance(r.get("text"), str) else "",
            "isError": r.get("isError") is True,
        }
        for r in message.get("toolResults") or []
    ]
    if results:
        built["toolResults"] = results
    return built


def _reason(result: TurnResult, prefix: str) -> str:
    """The reason vocabulary: `ok`, `ok-local`, `ok-rules`, `rules`, `rules:<why>`."""
    if prefix:
        return prefix
    if result.judge == "rules" and result.reason in ("tainted", "unproven"):
        return f"rules:{result.reason}"
    return result.reason or "rules"
