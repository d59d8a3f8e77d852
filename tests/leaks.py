"""Secrets of the newer redaction families, one line each, built at run time for sink tests.

No key-shaped literal is committed: every secret is assembled from pieces and a seeded generator.
"""

from __future__ import annotations

import random
import string

_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def new_family_leaks(seed: int = 7) -> list[tuple[str, str, str]]:
    """(line, secret, family label): `line` holds `secret`, which redaction counts under the
    label. The secrets are distinct and none is a substring of another line."""
    rng = random.Random(seed)

    def key(n: int) -> str:  # lower, digits and upper, so no rule takes it for a word
        third = n // 3
        return (
            _rand(rng, string.ascii_lowercase, third)
            + _rand(rng, string.digits, third)
            + _rand(rng, string.ascii_uppercase, n - 2 * third)
        )

    azure = key(86)
    redis_pw = key(18)
    db_pass = key(16)
    word_pw = "Correct" + "Horse" + "Battery" + "Staple" + _rand(rng, string.ascii_uppercase, 4)
    xapp = "xapp" + "-1-A" + key(10) + "-" + _rand(rng, string.digits, 13) + "-" + key(40)
    whsec = "wh" + "sec_" + key(32)
    gocspx = "GOC" + "SPX-" + key(28)
    dsn = _rand(rng, _HEX, 32)
    curl_pw = key(14)
    twilio = "S" + "K" + _rand(rng, _HEX, 32)
    webhook = "T" + key(9) + "/B" + key(9) + "/" + key(24)
    return [
        (
            f"AZURE_STORAGE=DefaultEndpointsProtocol=https;AccountKey={azure};",
            azure,
            "azure-storage",
        ),
        (f"REDIS_URL=redis://:{redis_pw}@cache.internal:6379/0", redis_pw, "url-password"),
        (f"DB_PASS={db_pass}", db_pass, "named"),
        (f"PASSWORD={word_pw}", word_pw, "named"),
        (f"SLACK_APP_TOKEN={xapp}", xapp, "slack"),
        (f"webhook signing secret {whsec}", whsec, "stripe"),
        (f"client secret {gocspx}", gocspx, "google-oauth"),
        (f"dsn https://{dsn}@o4501.ingest.sentry.io/4502", dsn, "sentry"),
        (f"curl -u deploy:{curl_pw} https://api.example.com/items", curl_pw, "curl-user"),
        (f"twilio key {twilio}", twilio, "twilio"),
        (f"notify https://hooks.slack.com/services/{webhook}", webhook, "slack-webhook"),
    ]
