"""No secret from a generated set survives into a saved output (compaction end to end)."""

from __future__ import annotations

import asyncio
import string
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrail.core.formats import openai_chat
from factrail.judges.rules import RulesJudge
from factrail.session import SessionCompactor
from factrail.stores.memory_state import MemoryStateStore
from factrail.stores.outputs import OutputStore
from tests.leaks import new_family_leaks
from tests.options import engine_options

ALNUM = string.ascii_letters + string.digits


def body(min_size: int, alphabet: str = ALNUM, exact: bool = False) -> st.SearchStrategy[str]:
    """Random key material with at least three distinct chars (one repeated char is a
    placeholder)."""
    max_size = min_size if exact else min_size + 12
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size).filter(
        lambda s: len(set(s)) > 2
    )


# Prefixes are assembled at run time so no key-shaped literal sits in the source.
SECRETS = st.one_of(
    body(24).map(lambda b: "sk-" + "proj-" + b),
    body(24).map(lambda b: "sk-" + "ant-" + "api03-" + b),
    body(36).map(lambda b: "gh" + "p_" + b),
    body(16, string.ascii_uppercase + string.digits, exact=True).map(lambda b: "AK" + "IA" + b),
    body(24).map(lambda b: "xox" + "b-" + b),
    body(30).map(lambda b: "AI" + "za" + b),
    st.tuples(body(12), body(12), body(12)).map(lambda t: "ey" + "J" + ".".join(t)),
    body(20).map(lambda b: "Authorization: Bearer " + b),
    body(14).map(lambda b: "postgres://app:" + b + "@db.internal/app"),
    body(14).map(lambda b: "DB_PASSWORD=" + b),
)


def transcript(secrets: list[str]) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [{"role": "user", "content": "Debug the failing service."}]
    for i in range(24):
        cid = f"call_{i:02d}"
        leak = secrets[i % len(secrets)]
        lines = [f"log line {j}: request req-{i:03d}{j:04d} handled" for j in range(150)]
        lines.insert(75, f"config dump: {leak}")
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "Bash", "arguments": '{"command": "env"}'},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": "\n".join(lines)})
    msgs.append({"role": "user", "content": "Keep going."})
    return msgs


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(SECRETS, min_size=1, max_size=4))
def test_no_generated_secret_reaches_a_saved_output(secrets: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        compactor = SessionCompactor(
            engine_options(trigger_tokens=4000, trigger_percent=0.0),
            state=MemoryStateStore(),
            outputs=OutputStore(root),
            judge=RulesJudge(),
        )
        result = asyncio.run(compactor.compact("s", openai_chat.parse(transcript(secrets))))
        assert result.outcome == "compacted" and result.saved > 0
        saved = [p.read_text(encoding="utf-8") for p in root.rglob("*.txt")]
        assert saved
        for text in saved:
            for secret in secrets:
                value = secret.split("Bearer ")[-1].split(":", 2)[-1].split("=")[-1]
                assert value not in text


def test_the_newer_families_never_reach_a_saved_output(tmp_path: Path) -> None:
    """Azure keys, redis URL passwords, `DB_PASS=`, word-like passwords, Slack app tokens and
    webhooks, `whsec_`, `GOCSPX-`, Sentry DSNs, `curl -u`, Twilio keys: each in a tool result
    that compaction saves, each masked under its family in the file."""
    leaks = new_family_leaks()
    compactor = SessionCompactor(
        engine_options(trigger_tokens=4000, trigger_percent=0.0),
        state=MemoryStateStore(),
        outputs=OutputStore(tmp_path),
        judge=RulesJudge(),
    )
    wire = transcript([line for line, _, _ in leaks])
    result = asyncio.run(compactor.compact("s", openai_chat.parse(wire)))
    assert result.outcome == "compacted" and result.saved > 0
    saved = "\n".join(p.read_text(encoding="utf-8") for p in tmp_path.rglob("*.txt"))
    for line, secret, family in leaks:  # each leak sits in two or three of the 24 calls
        assert secret not in saved, line
        assert f"[REDACTED:{family}]" in saved, line
