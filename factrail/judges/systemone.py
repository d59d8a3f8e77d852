"""The System One judge (TypeSafe, or any "sovereign façade" speaking the same format).

One POST per request, to exactly the configured URL, with `{model, state, questions}` redacted.
Every question must come back as `answers[name].noul`, a finite number in [0, 1]; a question
that does not is reported missing and its call falls to the rules, while the others are used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from factrail.core.plan import JudgeRequest, probability
from factrail.core.text import compact_json
from factrail.judges.base import (
    JudgeConfigError,
    JudgeError,
    JudgeFailure,
    JudgeRound,
    bearer_headers,
    json_object,
    redact_outgoing,
    reply_model,
    secrets_with,
)
from factrail.judges.retry import DEFAULT_POLICY, DeadlineCaller, RetryPolicy

DEFAULT_URL = "https://api.typesafe.ai/v1/systemone"
DEFAULT_MODEL = "jev-latest"


@dataclass(slots=True)
class _Reply:
    answers: dict[str, float] = field(default_factory=dict)
    errors: list[JudgeError] = field(default_factory=list)
    redacted: int = 0
    usage: object = None
    model: str | None = None


class SystemOneJudge:
    """Asks a System One endpoint; keyless only when the endpoint is declared local."""

    kind: Literal["systemone"] = "systemone"

    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        url: str = DEFAULT_URL,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        local: bool = False,
        known: Sequence[str] = (),
        concurrency: int = 4,
        policy: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        if not api_key and not local:
            raise JudgeConfigError("a keyless System One endpoint must be declared local")
        self.client = client
        self.endpoint = url
        self.model = model
        self.local = local
        self._key = api_key or None
        self.known_secrets = secrets_with(self._key, known)
        self._concurrency = max(1, concurrency)
        self._policy = policy

    async def ask(self, requests: Sequence[JudgeRequest], *, deadline: float) -> JudgeRound:
        """Ask every request concurrently; answers of the requests that succeed are kept."""
        caller = DeadlineCaller(
            self.client, deadline=deadline, known=self.known_secrets, policy=self._policy
        )
        gate = asyncio.Semaphore(self._concurrency)
        replies = await asyncio.gather(*(self._ask_one(r, caller, gate) for r in requests))
        result = JudgeRound()
        for reply in replies:
            result.answers.update(reply.answers)
            result.errors.extend(reply.errors)
            result.redacted += reply.redacted
            result.add_reply(reply.usage, reply.model)
        return caller.finish(result)

    def body(self, request: JudgeRequest) -> tuple[bytes, int]:
        """The exact request bytes (state and questions redacted) and the redaction count."""
        state, n_state = redact_outgoing(request.state, self.known_secrets)
        questions, n_questions = redact_outgoing(request.questions, self.known_secrets)
        payload = {"model": self.model, "state": state, "questions": questions}
        return compact_json(payload).encode(), n_state + n_questions

    async def _ask_one(
        self, request: JudgeRequest, caller: DeadlineCaller, gate: asyncio.Semaphore
    ) -> _Reply:
        body, redacted = self.body(request)
        reply = _Reply(redacted=redacted)
        try:
            async with gate:
                response = await caller.post(self.endpoint, body, bearer_headers(self._key))
        except JudgeFailure as failure:
            reply.errors.append(failure.error)
            return reply
        try:
            data = _parse(response)
        except JudgeFailure as failure:
            caller.reclassify(failure.error.outcome)
            reply.errors.append(failure.error)
            return reply
        answers = data["answers"]
        for name in request.questions:
            entry = answers.get(name)
            p = probability(entry.get("noul")) if isinstance(entry, Mapping) else None
            if p is None:
                reply.errors.append(JudgeError.missing(name))
            else:
                reply.answers[name] = p
        if reply.errors:
            caller.reclassify("missing-answer")
        reply.usage, reply.model = data.get("usage"), reply_model(data)
        return reply


def _parse(response: httpx.Response) -> dict[str, Any]:
    data = json_object(response)
    if not isinstance(data.get("answers"), dict):
        raise JudgeFailure(JudgeError.malformed("no `answers` object"))
    return data
