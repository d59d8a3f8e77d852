"""The reference synthetic generator: splitmix64 and byte-stable sessions."""

from __future__ import annotations

import hashlib
from dataclasses import asdict

import pytest

from factrail.core.model import transcript_chars
from factrail.core.text import compact_json
from factrail.eval.facts import facts
from factrail.eval.synthetic import SplitMix64, calls_for, corpus, fact_token, session

PINNED = {
    0: "3f58f64fb19b99f1a765ef9beafa39a93484704cc840fc8a9a072c42c491c9d5",
    1: "7011b39c86e7cc1a9ad26d0cc317e1ec879ef13f886ed80fe2b1e4f9b1763091",
    2: "655c4834f47cc438f8023fde9fd5eb4006e477634c261499a476274098ef6dfa",
}


def test_splitmix64_known_outputs() -> None:
    rng = SplitMix64(0)
    assert rng.next() == 0xE220A8397B1DCDAF
    assert rng.next() == 0x6E789E6AA1B965F4
    assert SplitMix64(2**64 - 1).state == 2**64 - 1


def test_helpers_draw_one_output_each() -> None:
    a, b = SplitMix64(5), SplitMix64(5)
    assert a.below(7) == b.next() % 7
    assert a.pick("xyz") == "xyz"[b.next() % 3]
    digits = a.hex(4)
    assert digits == "".join(format(b.next() % 16, "x") for _ in range(4))


@pytest.mark.parametrize("seed", sorted(PINNED))
def test_sessions_are_byte_stable(seed: int) -> None:
    ((name, messages),) = corpus(seed, 1)
    assert name == f"synthetic-{seed}"
    blob = compact_json([asdict(m) for m in messages]).encode()
    assert hashlib.sha256(blob).hexdigest() == PINNED[seed]


def test_structure() -> None:
    for seed, (_, messages) in enumerate(corpus(0, 3)):
        calls = calls_for(seed)
        assert 30 <= calls <= 59
        assert len(messages) == 2 + 2 * calls + calls // 9
        assert transcript_chars(messages) > 50_000
        ids = [u.tool_use_id for m in messages for u in m.tool_uses]
        assert ids[0] == f"toolu_{seed:04x}_000"
        assert ids[-1] == f"toolu_{seed:04x}_{calls - 1:03d}"
        assert messages[0].text.endswith("service is failing in staging. Find out why and fix it.")
        assert messages[-1].text == "Summary of the investigation so far."
        assert facts(messages)


def test_session_is_deterministic_and_seed_dependent() -> None:
    assert session(7, 30) == session(7, 30)
    assert session(7, 30) != session(8, 30)


def test_fact_token_counts_bytes() -> None:
    assert fact_token("upstream api pid 12345 refused") == "upstream api pid 12345 refused"
    assert fact_token("pid 123456 x") == "123456"
    assert fact_token("id é1234 x") == "é1234"
