"""Credential redaction: every family, placeholders and non-secrets, JSON walk, known values.

Secret-shaped strings are assembled at run time so that no key-shaped literal is committed.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrail.core.kernels import Kernels, use
from factrail.core.redact import _FAMILIES, FAMILY_LABELS, _anchors_in, redact, redact_value

ALNUM = string.ascii_letters + string.digits


def body(n: int, step: int = 7) -> str:
    """A deterministic, key-looking run of `n` alphanumerics (never one repeated char)."""
    return "".join(ALNUM[(i * step + 3) % len(ALNUM)] for i in range(n))


def upper(n: int) -> str:
    return "".join((string.ascii_uppercase + string.digits)[(i * 5 + 1) % 36] for i in range(n))


# family -> builder of a secret from a random alphanumeric body of 40+ chars
BUILDERS: dict[str, Callable[[str], str]] = {
    "jwt": lambda s: "ey" + "J" + s[:12] + "." + "ey" + "J" + s[12:24] + "." + s[24:],
    "sk-ant": lambda s: "sk-" + "ant-api03-" + s,
    "sk-proj": lambda s: "sk-" + "proj-" + s,
    "sk-or-v1": lambda s: "sk-" + "or-v1-" + s,
    "sk": lambda s: "sk-" + s,
    "stripe": lambda s: "sk" + "_live_" + s,
    "github-pat": lambda s: "github" + "_pat_" + s,
    "gh-token": lambda s: "gh" + "p_" + s,
    "glpat": lambda s: "gl" + "pat-" + s,
    "hf": lambda s: "hf" + "_" + s,
    "npm": lambda s: "npm" + "_" + s,
    "nia": lambda s: "nk" + "_" + s,
    "google-api": lambda s: "AI" + "za" + s,
    "slack": lambda s: "xox" + "b-" + "1234567890-" + s,
    "pplx": lambda s: "pplx" + "-" + s,
    "xai": lambda s: "xai" + "-" + s,
    "groq": lambda s: "gsk" + "_" + s,
    "sakana": lambda s: "fish" + "_" + s,
    "keenable": lambda s: "keen" + "_" + s,
    "sendgrid": lambda s: "SG" + "." + s[:22] + "." + s[18:],
    "telegram": lambda s: "123456789" + ":AA" + s,
}


def examples() -> dict[str, str]:
    """One secret per family, each labelled by the family it must be counted under."""
    out = {name: build(body(44)) for name, build in BUILDERS.items()}
    out["aws-akia"] = "AK" + "IA" + upper(16)
    out["nostr-nsec"] = "nsec" + "1" + "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
    out["private-key"] = (
        "-----BEGIN "
        + "RSA PRIVATE KEY-----\n"
        + body(64)
        + "\n"
        + body(64, 5)
        + "\n-----END RSA PRIVATE KEY-----"
    )
    return out


@pytest.mark.parametrize(("family", "secret"), sorted(examples().items()))
def test_every_family_is_redacted_and_counted(family: str, secret: str) -> None:
    r = redact(f"before {secret} after")
    assert r.text == f"before [REDACTED:{family}] after"
    assert (r.count, r.families) == (1, {family: 1})
    assert family in FAMILY_LABELS


@pytest.mark.parametrize(
    "prefix", ["sk-" + "svcacct-", "sk-" + "admin-", "sk-" + "ant-admin01-", "sk-" + "ant-"]
)
def test_openai_and_anthropic_variants(prefix: str) -> None:
    r = redact(f"key={prefix}{body(40)} ")
    assert body(40) not in r.text
    assert r.count == 1


def test_stripe_restricted_and_other_gh_tokens() -> None:
    for secret in ["rk" + "_test_" + body(24), *("gh" + c + "_" + body(36) for c in "ousr")]:
        assert redact(secret).count == 1, secret


def test_truncated_private_key_collapses_to_the_end_of_text() -> None:
    text = "cat id:\n-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + body(70)
    assert redact(text).text == "cat id:\n[REDACTED:private-key]"


def test_aws_secret_keeps_its_label() -> None:
    value = body(40).replace("a", "/").replace("b", "+")
    r = redact(f"AWS_SECRET_ACCESS_KEY = {value}\n")
    assert r.text == "AWS_SECRET_ACCESS_KEY = [REDACTED:aws-secret]\n"
    assert r.families == {"aws-secret": 1}


def test_sk_needs_to_stand_alone_and_does_not_swallow_a_later_key() -> None:
    """§9.16: a lookbehind, so a rejected `task-…` span cannot hide an adjacent key."""
    key = "sk-" + body(24)
    assert redact("task-" + body(20)).count == 0
    r = redact("task-abcdefgh." + key)
    assert r.text == "task-abcdefgh.[REDACTED:sk]"


@pytest.mark.parametrize(
    "text",
    [
        "sk-" + "x" * 24,
        "sk-" + "proj-" + "x" * 30,
        "sk-" + "ant-api03-" + "x" * 30,
        "gh" + "p_" + "0" * 36,
        "password=********",
        "API_KEY=$OPENAI_API_KEY",
        "token: required",
        "secret = config.secret_value",
        "--api-key %API_KEY%",
        "password: undefined",
        "Bearer authentication is required",
        "task-" + "runner-manifest-loader",
    ],
)
def test_placeholders_and_non_secrets_are_left_alone(text: str) -> None:
    assert redact(text) == (text, 0, {})


def test_named_slots_and_cli_flags() -> None:
    assert redact("API_KEY=s3cr3tvalue99").text == "API_KEY=[REDACTED:named]"
    r = redact('{"password": "hunter2hunter2"}')
    assert r.text == '{"password": "[REDACTED:named]"}'
    assert redact("run --token abcdef123456 now").text == "run --token [REDACTED:named] now"
    assert redact("x --db-password='pa55word!'").text == "x --db-password='[REDACTED:named]'"
    assert redact("private_key: 'q8Zr2mW4n'").families == {"named": 1}


def test_case_insensitive_steps_survive_a_length_changing_lower_case() -> None:
    """`"İ".lower()` is two chars: the lower-cased scan must not shift the replacements."""
    value = body(40)
    for prefix in ("", "İ "):
        text = f"{prefix}AWS_Secret_Access_Key: {value} Api-Key=q8Zr2mW4n --DB-Password Zq9xy8wv7"
        assert redact(text).text == (
            f"{prefix}AWS_Secret_Access_Key: [REDACTED:aws-secret] Api-Key=[REDACTED:named]"
            " --DB-Password [REDACTED:named]"
        )


def test_flag_names_need_the_keyword_within_bounds() -> None:
    assert redact("--" + "x" * 31 + "-token q8Zr2mW4n").count == 0
    assert redact("--" + "x" * 29 + "-token q8Zr2mW4n").count == 1
    assert redact("--name=q8Zr2mW4n --verbose abcdefgh1").count == 0


def test_auth_scheme_and_url_password() -> None:
    r = redact("Authorization: Bearer abc.def-123_456")
    assert r.text == "Authorization: Bearer [REDACTED:bearer]"
    assert redact("Basic dXNlcjpwYXNzd29yZA==").text == "Basic [REDACTED:bearer]"
    r = redact("postgres://admin:pa55w0rd@db.local:5432/app")
    assert r.text == "postgres://admin:[REDACTED:url-password]@db.local:5432/app"
    assert r.families == {"url-password": 1}
    assert redact("x://admin:pa55w0rd@host").count == 0  # a one-letter scheme is not a URL
    assert redact("HTTPS://u:pa55w0rd@h").text == "HTTPS://u:[REDACTED:url-password]@h"


def test_known_values_count_every_occurrence_and_go_first() -> None:
    key = "judge-" + body(20)
    r = redact(f"{key} and {key}", known=[key, "short"])
    assert r == ("[REDACTED:known] and [REDACTED:known]", 2, {"known": 2})
    assert redact("short text", known=["short"]).count == 0


def test_counts_add_up_across_families() -> None:
    text = " ".join(examples().values()) + " API_KEY=s3cr3tvalue99"
    r = redact(text)
    assert r.count == sum(r.families.values()) == len(examples()) + 1
    assert set(r.families) <= set(FAMILY_LABELS)


def test_json_walk_redacts_values_never_keys() -> None:
    token = "gh" + "p_" + body(36)
    value = {"a": [token, 3, None], token: 1, "n": {"k": "Bearer " + body(20)}}
    new, counts = redact_value(value)
    assert new == {
        "a": ["[REDACTED:gh-token]", 3, None],
        token: 1,
        "n": {"k": "Bearer [REDACTED:bearer]"},
    }
    assert counts == (2, {"gh-token": 1, "bearer": 1})
    assert value["a"] == [token, 3, None]  # the input is not mutated


def test_clean_text_is_returned_unchanged() -> None:
    text = "def main():\n    return compute(token_count, key_name)  # 42 files, 1.2.3\n"
    assert redact(text) == (text, 0, {})


AWS_ALPHABET = string.ascii_uppercase + string.digits
NSEC_ALPHABET = "023456789acdefghjklmnpqrstuvwxyz"


@st.composite
def secrets(draw: st.DrawFn) -> str:
    family = draw(st.sampled_from([*sorted(BUILDERS), "aws-akia", "nostr-nsec"]))
    if family == "aws-akia":
        return "AK" + "IA" + draw(st.text(AWS_ALPHABET, min_size=16, max_size=16))
    if family == "nostr-nsec":
        return "nsec" + "1" + draw(st.text(NSEC_ALPHABET, min_size=20, max_size=50))
    s = draw(st.text(ALNUM, min_size=40, max_size=60).filter(lambda x: len(set(x)) > 2))
    return BUILDERS[family](s)


@settings(max_examples=150, deadline=None)
@given(
    secret=secrets(),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
    sep=st.sampled_from([" ", "\n", '"', "'", "=", ": ", "(", ",", "\t"]),
)
def test_no_generated_secret_survives(secret: str, before: str, after: str, sep: str) -> None:
    out = redact(before + sep + secret + sep[::-1] + after).text
    assert secret not in out


def test_all_letter_bearer_tokens_are_secrets_but_words_are_not() -> None:
    token = "AAAAAAAA" + "AAAAAAAAAABC"
    assert (
        redact("Authorization: Bearer " + token).text == "Authorization: Bearer [REDACTED:bearer]"
    )
    assert redact("Bearer " + "abcdefghij" * 3).count == 1
    for prose in ("Bearer authentication is used", "Token based auth", "Basic Realm"):
        assert redact(prose).text == prose


_ANCHOR_PIECES = st.sampled_from(
    ["sk-", "sk-ant-", "_live_", "_test_", "ghp_", "AKIA", "eyJ", ":AA", "SG.", "xox", "x", "-",
     "_", " ", "\n", "é", "🔑", "S", "k", "-----BEGIN", "-----BEGIN ", "github_pat", "nsec1",
     "glpat-", "sk-or-v", "aws_secret_access_ke", "y", "A", "I", "G", "gh", "o_", "Ё",
     # anchors sharing a first char, which the kernel chains: s, S, k, h, d, :
     "SK", "sig=", "secret_", "sntryu_", "sq0atp-", "shpat_", "key-", "hvs.", "hf_", "dp.pt.",
     "dapi", "://", "-us1", "-us", "whsec_", "Q~"]
)  # fmt: skip


def _anchors_by_substring_search(text: str) -> set[str]:
    anchors = {a for f in _FAMILIES if f.any_case is None for a in f.anchors}
    return {a for a in anchors if a in text}


@given(st.lists(_ANCHOR_PIECES, max_size=16).map("".join))
def test_the_one_pass_anchor_scan_finds_what_substring_search_finds(text: str) -> None:
    """On the Python path: one Aho–Corasick pass finds every anchor that occurs."""
    with use(Kernels()):
        assert _anchors_in(text) == _anchors_by_substring_search(text)


@given(st.lists(_ANCHOR_PIECES, max_size=16).map("".join), st.sampled_from(["", "0123456789"]))
def test_the_anchor_kernel_finds_what_the_python_finds(
    native: ModuleType, text: str, tail: str
) -> None:
    """On the C kernel's path (a two-char table, then a compare): the same anchors as substring
    search and the Python, so `redact` gives the same text and counts on both paths."""
    text += tail * 3  # long enough after an anchor for some families to match
    with use(Kernels(native)):
        assert _anchors_in(text) == _anchors_by_substring_search(text)
        native_redacted = redact(text)
    with use(Kernels()):
        assert native_redacted == redact(text)


def test_the_anchor_kernel_refuses_anchors_it_cannot_scan_for(native: ModuleType) -> None:
    for bad in (("a",), ("é1",), ("ok", 3)):
        with pytest.raises((ValueError, TypeError)):
            native.anchors_in("text", bad)
    for args in ((b"text", ("ok",)), ("text", ["ok"]), ("text",)):
        with pytest.raises(TypeError):
            native.anchors_in(*args)
