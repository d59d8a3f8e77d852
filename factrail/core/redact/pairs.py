"""Key/value pair objects: an object (JSON, YAML, a flow mapping, AWS shorthand) whose name
field holds a credential's name and whose value field holds the credential, as Kubernetes
and ECS `env` lists, kubeconfig `exec.env`, Postman variables and CloudFormation parameters
write them: `{"key": "api_token", "value": …}`, `- name: DB_PASSWORD\\n  value: …`,
`ParameterKey=DbPassword,ParameterValue=…`. The name field may come before or after the value
field; both must belong to the same item (the same flow object, or the same YAML/JSON block
item: lines at the name field's column, up to a new list item or a dedent)."""

from __future__ import annotations

import re
from functools import partial

from factrail.core.redact.forms import VALUE_FORM, CodeContext, first_line, value_span
from factrail.core.redact.names import Tier, credential_tier
from factrail.core.redact.values import slot_value_is_secret

Spans = list[tuple[int, int]]

_FIELD_END = r"(?P<q1>\\?[\"'])?[ \t]*(?:=>|[:=])[ \t]*"
PAIR_NAMES = tuple(
    re.compile(
        rf"{field}(?:(?<![\w.-]{field})|(?<=parameter{field})){_FIELD_END}"
        r"(?P<q2>\\?[\"'])?(?=[\w.-]{0,60}?(?:pass|pwd|secret|token|key|auth|cred|sess|sig|dsn|jwt|pat|sid|code))"
        r"(?P<name>[a-z_][\w.-]{1,63})(?(q2)(?P=q2)|(?=[\s,}]|\Z))"
    )
    for field in ("key", "name")
)
"""A name field (`key`, `name`, `ParameterKey`) and its value, over the lower-cased text."""
_PAIR_VALUE = re.compile(rf"value(?:(?<![\w.-]value)|(?<=parametervalue)){_FIELD_END}{VALUE_FORM}")
_WINDOW = 400


def _column(text: str, at: int) -> tuple[int, int, bool]:
    """The line start of `at`, the column of the first key on that line (past blanks and a
    `- ` list marker) and whether the line starts a list item."""
    start = text.rfind("\n", 0, at) + 1
    pos = start
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    dash = text.startswith("- ", pos)
    if dash:
        pos += 2
        while pos < len(text) and text[pos] == " ":
            pos += 1
    return start, pos - start, dash


def _item(text: str, field: int, name_end: int) -> tuple[int, int]:
    """The part of `text` holding the item the name field at `field` belongs to: the flow
    object around it, or the block item (the lines whose first key is at its column, back to
    its `- ` and on to the next item or a dedent)."""
    start, col, dash = _column(text, field)
    line_end = text.find("\n", field)
    line_end = len(text) if line_end < 0 else line_end
    opened = text.rfind("{", start, field)
    closed = text.find("}", name_end, line_end)
    if opened >= 0 or closed >= 0 or field - start != col:
        return (opened + 1 if opened >= 0 else start), (closed if closed >= 0 else line_end)
    first = start
    while not dash and first > 0 and start - first < _WINDOW:
        prev = text.rfind("\n", 0, first - 1) + 1
        if text[prev:first].strip():
            _, p_col, p_dash = _column(text, prev)
            if p_col < col:
                break
            dash = p_dash and p_col == col
        first = prev
    last = line_end
    while last < len(text) and last - line_end < _WINDOW:
        nxt = last + 1
        stop = text.find("\n", nxt)
        stop = len(text) if stop < 0 else stop
        if text[nxt:stop].strip():
            _, n_col, n_dash = _column(text, nxt)
            if n_col < col or (n_dash and n_col <= col):
                break
        last = stop
    return first, last


def pair_spans(text: str, scan: str, context: CodeContext) -> list[tuple[int, int]]:
    """The credential values of key/value pair objects in `text` (`scan` is `text`
    lower-cased, with the same offsets)."""
    spans: Spans = []
    for pattern in PAIR_NAMES:
        for m in pattern.finditer(scan):
            n_start, n_end = m.span("name")
            tier = credential_tier(text[n_start:n_end], "pair")
            if tier is None:
                continue
            field = m.start() - (1 if text[m.start() - 1 : m.start()] in ('"', "'") else 0)
            lo, hi = _item(text, field, m.end())
            span = _value_in(text, scan, lo, hi, field, tier, context)
            if span is not None:
                spans.append(span)
    spans.sort()
    return spans


def _value_in(
    text: str, scan: str, lo: int, hi: int, field: int, tier: Tier, context: CodeContext
) -> tuple[int, int] | None:
    """The secret value field of the item `text[lo:hi]` whose name field is at `field`."""
    _, col, _ = _column(text, field)
    name_line = text.rfind("\n", 0, field) + 1
    for v in _PAIR_VALUE.finditer(scan, lo, hi):
        at = v.start() - (1 if text[v.start() - 1 : v.start()] in ('"', "'") else 0)
        v_line, v_col, _ = _column(text, at)
        if v_line != name_line and at - v_line != v_col:
            continue  # not the first key of its line
        if v_line != name_line and v_col != col:
            continue  # nested deeper
        deco = v.group("deco")
        if (v.group("block") is not None or "|" in deco or ">" in deco) and "=>" in v.group(0):
            continue
        span = value_span(text, v, at)
        if span is None:
            continue
        start, end = span
        quoted = bool(v.group("quote")) or v.group("block") is not None or bool(v.group("triple"))
        value = first_line(text, start, end)
        if len(value.split()) == 1 and slot_value_is_secret(
            value, tier, quoted, partial(context.at, start)
        ):
            return start, end
        return None
    return None
