"""The Tev judge: the Tev1 prompt on any OpenAI-compatible `/chat/completions`.

Each question is one chat call (a candidate costs two), all bounded by one semaphore and the
round's deadline. How the reply is constrained to a letter is configurable because servers
differ: vLLM's guided `regex` (the default), a `json_schema` enum, `logit_bias` on the letter
token ids (which are model specific, so none are sent unless configured), or `none`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from factrail.core.plan import JudgeRequest
from factrail.core.tev import SYSTEM, MalformedAnswer, probability_from_choice, render_decision
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

Constraint = Literal["none", "regex", "logit_bias", "json_schema"]
DEFAULT_MODEL = "tev1"
LETTER_SCHEMA: dict[str, Any] = {
    "name": "tev_answer",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["A", "B"]}},
        "required": ["answer"],
        "additionalProperties": False,
    },
}


@dataclass(slots=True)
class _Answer:
    name: str
    p: float | None = None
    error: JudgeError | None = None
    usage: object = None
    model: str | None = None


@dataclass(slots=True)
class _Prepared:
    redacted: int
    calls: list[tuple[str, bytes]] = field(default_factory=list)


class TevJudge:
    """Asks a Tev-format model one question per chat call."""

    kind: Literal["tev"] = "tev"

    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        base_url: str,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        local: bool = False,
        known: Sequence[str] = (),
        concurrency: int = 8,
        constraint: Constraint = "regex",
        logit_bias: Mapping[str, float] | None = None,
        policy: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        if not base_url.strip():
            raise JudgeConfigError("the Tev judge needs a base URL")
        self.client = client
        self.endpoint = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.local = local
        self.constraint = constraint
        self._key = api_key or None
        self.known_secrets = secrets_with(self._key, known)
        self._concurrency = max(1, concurrency)
        self._logit_bias = dict(logit_bias or {})
        self._policy = policy

    async def ask(self, requests: Sequence[JudgeRequest], *, deadline: float) -> JudgeRound:
        """Ask every question of every request; each answered question is kept."""
        caller = DeadlineCaller(
            self.client, deadline=deadline, known=self.known_secrets, policy=self._policy
        )
        gate = asyncio.Semaphore(self._concurrency)
        prepared = [self.prepare(r) for r in requests]
        calls = [call for p in prepared for call in p.calls]
        answers = await asyncio.gather(*(self._ask_one(n, b, caller, gate) for n, b in calls))
        result = JudgeRound(redacted=sum(p.redacted for p in prepared))
        for a in answers:
            if a.p is not None:
                result.answers[a.name] = a.p
            if a.error is not None:
                result.errors.append(a.error)
            result.add_reply(a.usage, a.model)
        return caller.finish(result)

    def prepare(self, request: JudgeRequest) -> _Prepared:
        """The exact body of every chat call of `request`, after redaction."""
        state, redacted = redact_outgoing(request.state, self.known_secrets)
        prepared = _Prepared(redacted)
        for name, question in request.questions.items():
            instructions, n = redact_outgoing(question.get("instructions", ""), self.known_secrets)
            prepared.redacted += n
            prepared.calls.append((name, compact_json(self.body(state, instructions)).encode()))
        return prepared

    def body(self, state: Mapping[str, Any], instructions: str) -> dict[str, Any]:
        """One chat-completions body for one question, with the configured constraint."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": render_decision(state, instructions)},
            ],
            "temperature": 0,
            "max_tokens": 8,
            "logprobs": True,
            "top_logprobs": 5,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        if self.constraint == "regex":
            body["response_format"] = {"type": "regex", "pattern": "(A|B)"}
        elif self.constraint == "logit_bias":
            body["max_tokens"] = 1
            if self._logit_bias:
                body["logit_bias"] = dict(self._logit_bias)
        elif self.constraint == "json_schema":
            body["max_tokens"] = 16
            body["response_format"] = {"type": "json_schema", "json_schema": LETTER_SCHEMA}
        return body

    async def _ask_one(
        self, name: str, body: bytes, caller: DeadlineCaller, gate: asyncio.Semaphore
    ) -> _Answer:
        answer = _Answer(name)
        try:
            async with gate:
                response = await caller.post(self.endpoint, body, bearer_headers(self._key))
        except JudgeFailure as failure:
            answer.error = dataclasses.replace(failure.error, question=name)
            return answer
        try:
            data = _parse(response)
            answer.usage, answer.model = data.get("usage"), reply_model(data)
            answer.p = probability_from_choice(data["choices"][0])
        except JudgeFailure as failure:
            answer.error = dataclasses.replace(failure.error, question=name)
        except MalformedAnswer as exc:
            answer.error = dataclasses.replace(JudgeError.malformed(str(exc)), question=name)
        if answer.error is not None:
            caller.reclassify(answer.error.outcome)
        return answer


def _parse(response: httpx.Response) -> dict[str, Any]:
    data = json_object(response)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise JudgeFailure(JudgeError.malformed("no choices[0]"))
    return data
