"""The judge protocol, its round result and its error vocabulary."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx

from factrail.core.plan import JudgeRequest
from factrail.core.redact import redact, redact_value

JudgeKind = Literal["rules", "systemone", "tev"]
ErrorKind = Literal["transport", "deadline", "status", "malformed", "missing-answer"]
STATUS_BODY_CHARS = 200


class JudgeConfigError(ValueError):
    """A judge that may not be built as configured (e.g. a keyless endpoint not declared local)."""


@dataclass(frozen=True, slots=True)
class JudgeError:
    """One failure of a judge request or question; `str()` gives the display form."""

    kind: ErrorKind
    message: str
    question: str | None = None
    """The question left unanswered by this failure, when it concerns exactly one."""

    @property
    def outcome(self) -> str:
        """A stable label for metrics."""
        return self.kind

    def __str__(self) -> str:
        return self.message

    @classmethod
    def transport(cls, exc: BaseException, known: Sequence[str] = ()) -> JudgeError:
        chain: list[str] = []
        cause: BaseException | None = exc
        while cause is not None and len(chain) < 8:
            chain.append(str(cause) or type(cause).__name__)
            cause = cause.__cause__
        text = redact(": ".join(chain), known).text
        return cls("transport", f"transport error: {text}")

    @classmethod
    def deadline(cls, ms: int) -> JudgeError:
        return cls("deadline", f"judge deadline of {ms} ms passed")

    @classmethod
    def status(cls, code: int, body: str, known: Sequence[str] = ()) -> JudgeError:
        text = redact(body, known).text[:STATUS_BODY_CHARS]
        return cls("status", f"judge answered HTTP {code}: {text}")

    @classmethod
    def malformed(cls, detail: str) -> JudgeError:
        return cls("malformed", f"malformed judge response: {detail}")

    @classmethod
    def missing(cls, name: str) -> JudgeError:
        return cls("missing-answer", f"judge gave no finite answer for {name}", name)


class JudgeFailure(Exception):
    """Raised inside a judge to abandon one request or question with a `JudgeError`."""

    def __init__(self, error: JudgeError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class JudgeRound:
    """What one compaction's judging produced.

    `answers` holds every valid answer received, from the requests that succeeded even when
    others failed; a question absent from it was not answered and its call falls to the rules.
    `requests` counts the HTTP calls sent (retries included); `redacted` the masked values.
    """

    answers: dict[str, float] = field(default_factory=dict)
    errors: list[JudgeError] = field(default_factory=list)
    requests: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    """HTTP calls by outcome (`ok`, `status`, `transport`, `deadline`, `malformed`,
    `missing-answer`); they add up to `requests`."""
    redacted: int = 0
    usage: dict[str, Any] | None = None
    model: str | None = None

    def add_reply(self, usage: object, model: str | None) -> None:
        """Sum one reply's `usage` in; the first model named is kept."""
        self.usage = add_usage(self.usage, usage)
        self.model = self.model or model


class Judge(Protocol):
    """Answers the noul questions of judge requests under one absolute deadline."""

    @property
    def kind(self) -> JudgeKind:
        """`rules`, `systemone` or `tev`."""
        ...

    @property
    def model(self) -> str: ...

    @property
    def local(self) -> bool:
        """Declared local (never inferred from the URL): may see tainted sessions."""
        ...

    @property
    def endpoint(self) -> str:
        """The URL posted to (empty for the rules judge)."""
        ...

    @property
    def known_secrets(self) -> tuple[str, ...]:
        """Exact strings masked in everything this judge sends (its own key first); whatever
        records what was sent (the decision log) masks them too."""
        ...

    async def ask(self, requests: Sequence[JudgeRequest], *, deadline: float) -> JudgeRound:
        """Ask every request; `deadline` is an absolute `time.monotonic()` value."""
        ...


def secrets_with(key: str | None, known: Sequence[str]) -> tuple[str, ...]:
    """The strings a judge masks: its key first, then the extra `known` ones, empties dropped."""
    return tuple(k for k in (key, *known) if k)


def bearer_headers(key: str | None) -> dict[str, str]:
    """JSON request headers, with a bearer `authorization` when there is a key."""
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def reply_model(data: Mapping[str, Any]) -> str | None:
    """The model a reply names, when it names one as a string."""
    model = data.get("model")
    return model if isinstance(model, str) else None


def redact_outgoing(value: Any, known: Sequence[str]) -> tuple[Any, int]:
    """`value` with every string redacted (object keys untouched), and how many were masked."""
    out, counts = redact_value(value, known=tuple(known))
    return out, counts.count


def add_usage(total: dict[str, Any] | None, usage: object) -> dict[str, Any] | None:
    """Sum the integer fields of `usage` into `total`; other fields keep their first value."""
    if not isinstance(usage, Mapping):
        return total
    out = dict(total or {})
    for k, v in usage.items():
        key = str(k)
        if isinstance(v, int) and not isinstance(v, bool):
            prev = out.get(key, 0)
            out[key] = (prev if isinstance(prev, int) else 0) + v
        else:
            out.setdefault(key, v)
    return out


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The response body as a JSON object, or a `malformed` judge failure."""
    try:
        data = json.loads(response.content)
    except ValueError:
        raise JudgeFailure(JudgeError.malformed("body is not JSON")) from None
    if not isinstance(data, dict):
        raise JudgeFailure(JudgeError.malformed("body is not a JSON object"))
    return data
