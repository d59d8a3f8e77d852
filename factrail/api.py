"""The engine for library users: compact one transcript as the gateway would."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from factrail import runtime
from factrail.core.formats.detect import dump_document, parse_any
from factrail.policy.provenance import raw_evidence
from factrail.session import TurnResult
from factrail.settings import Settings
from factrail.stores.outputs import OutputStore


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compacted transcript in its input's format (the input's own bytes when nothing
    changed), and what the step did."""

    data: bytes
    result: TurnResult
    calls: int
    """Tool calls in the transcript."""

    @property
    def changed(self) -> bool:
        """Whether anything in the transcript changed."""
        return self.result.document is not None


async def compact_transcript(
    data: bytes | str,
    *,
    filename: str | None = None,
    settings: Settings | None = None,
    session: str = "api",
    outputs: OutputStore | None = None,
    client: httpx.AsyncClient | None = None,
) -> Compaction:
    """Compact one transcript (OpenAI chat JSON, Responses, Anthropic Messages, Claude Code
    `.jsonl` when `filename` ends so) once past the soft line of `settings.trigger_tokens`.

    The judge is the one `settings` names (rules by default; a remote judge needs `client`).
    Reduced outputs are saved to `outputs` when given. Raises FormatError for input it cannot
    read and JudgeConfigError for a judge that may not be built.
    """
    # one transcript, once: its state lives in memory and no decision is logged
    cfg = (settings or Settings()).model_copy(
        update={"state_url": "memory://", "record_decisions": False}
    )
    doc = parse_any(data, filename=filename)
    own = client is None
    http = client or httpx.AsyncClient()
    try:
        compactor = runtime.compactor(
            cfg,
            judge=runtime.judge(cfg, http, fallback=False).required(),
            state=runtime.state_store(cfg),
            outputs=outputs,
            options=cfg.engine_options(outputs_route=None),
        )
        try:
            result = await compactor.compact(
                session, doc, evidence=raw_evidence(data, doc.messages)
            )
        finally:
            compactor.close()
    finally:
        if own:
            await http.aclose()
    calls = sum(len(m.tool_uses) for m in doc.messages)
    if result.document is None:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        return Compaction(raw, result, calls)
    return Compaction(dump_document(doc, result.document).encode("utf-8"), result, calls)
