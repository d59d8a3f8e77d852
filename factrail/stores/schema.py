"""The schema versions of the records factrail persists, one constant per record kind.

Every record carries the version of its layout under `VERSION` (`"v"`), written on every save;
a record without one is version 1. A reader reads each version it knows and treats one it does
not know (a newer writer's) as absent: a miss, which costs prompt-cache hits and judge calls,
never correctness. Two kinds carry the fence and are read the safe way instead: a session
record of an unknown version is unreadable (`fetch` says the store did not answer, so the
session is not proven clean), and a taint record of an unknown version counts as tainted
(`factrail.policy.taint.TAINT_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VERSION = "v"
"""The key of a record's schema version (a field of a Redis hash of that name)."""

STATE_SCHEMA = 2
"""The session record (`state.encode_state`): one JSON object per session in SQLite, Redis
(`<p>s:<session>`) and the memory store.

1. No version. `plan` and `answers` are the maps of entries themselves; `bets` may be absent
   (not counted: None once the record has compactions).
2. `v`. `plan` and `answers` are records of their own (`PLAN_SCHEMA`, `ANSWERS_SCHEMA`), each
   `{"v", "entries"}`; `bets` is always written (null: not counted).

Fields added to version 2 without a new version (a reader ignores fields it does not know, and
reads one a record lacks as its default): `forced`, `cold` (absent: not counted, None once the
record has compactions, as `bets` in version 1), `shadow` and `turns` (absent: 0),
`projected_billed` and `projected_spared` (absent: None).

The taint record (`taint`) and the compaction records (`history`) are kept as they were
written, each with its own version; `mark` is the gateway's anchor, kept opaque."""

PLAN_SCHEMA = 2
"""A session's plan: tool_use_id → how its result was reduced (`h` the original's hash, `t` the
reduced text, `i` the briefed input, `r` where its blanked secrets lie in the originals).

1. The map itself, in a version-1 session record. An entry without `r` was not looked for
   secrets: it is looked at when saved again, and dropped if it holds one.
2. `{"v": 2, "entries": map}`. Every entry has `r` (empty: it holds no secret)."""

ANSWERS_SCHEMA = 2
"""A session's remembered judge answers: `<tool_use_id>|<judge>` → `{keepCall, keepResult}`.

1. The map itself, in a version-1 session record.
2. `{"v": 2, "entries": map}`."""

COMPACTION_SCHEMA = 2
"""One compaction as `factrail inspect` shows it (`SessionState.history`, written by the
session step, kept as written).

1. No version. `decision` (the cost gate's), `turns` and `window` may be absent, and so may a
   result's `recent` and `arguments_whole` (where its briefed arguments were saved).
2. `v`; every field written."""

FIGURE_SCHEMA = 2
"""A figure an answer taught a session, on a Redis key of its own: the calibration
(`<p>c:`), the cache reach (`<p>reach:`), the last cache read (`<p>read:`) and the cache
marker's anchor (`<p>mark:`). In SQLite and memory they are fields of the session record.

1. The bare value: a number, or the anchor's JSON object.
2. `{"v": 2, "x": value}`."""

BILL_SCHEMA = 2
"""A session's bill on Redis (`<p>bill:`): a hash of `billed`, `spared`, `projected_billed`,
`projected_spared` (`HINCRBYFLOAT`) and `turns` (`HINCRBY`), each added to atomically; a field
that is absent is not counted yet (the last three were added to version 2: a reader ignores
fields it does not know). In SQLite and memory they are fields of the session record.

1. No `v` field.
2. A `v` field (set by the first addition that finds none)."""

LINK_SCHEMA = 2
"""An answer id → the session it answered (response chains): a row of the SQLite `links`
table, or the Redis key `<p>r:<response id>`.

1. SQLite: the row's `v` column is 1 (its default). Redis: the bare session key.
2. SQLite: `v` is 2. Redis: `{"v": 2, "session": key}`."""

TURN_SCHEMA = 1
"""One answered turn in a session's turn log (`StateStore.turns`): the record the gateway
gave `Observed.turn`, with `v`. Kept as the newest `state.MAX_TURNS` of the session: SQLite's
`turns` table, the Redis list `<p>turns:<session>`, a deque in the memory store.

1. The gateway's record and `v`."""

DECISION_SCHEMA = 2
"""One line of the decision log (`factrail.stores.decisions`; built by
`factrail.session.judging.decision_record`).

1. No version.
2. `v`; otherwise as version 1."""


def version_of(record: Mapping[str, Any]) -> int | None:
    """The record's schema version: 1 without one; None when it is not an integer (a version
    no reader knows)."""
    if VERSION not in record:
        return 1
    version = record[VERSION]
    return version if isinstance(version, int) and not isinstance(version, bool) else None
