"""Redaction family by family: each secret shape the issue and gitleaks' default rules list, and
beside it the placeholder or ordinary text of the same look that must stay.

Every secret-shaped string is assembled at run time from pieces and a seeded generator, so no
key-shaped literal is committed (push protection and scanners stay quiet, and no real key can
hide in a fixture).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

import pytest

from factrail.core.redact import FAMILY_LABELS, redact

_RNG = random.Random(20240613)
LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def rand(alphabet: str, n: int) -> str:
    """`n` chars of `alphabet` from the seeded generator, at least two of them distinct."""
    while True:
        out = "".join(_RNG.choice(alphabet) for _ in range(n))
        if len(set(out)) > 2:
            return out


def mixed(n: int) -> str:
    """Key material holding lower, upper and digits."""
    return rand(LOWER, n // 3) + rand(DIGITS, n // 3) + rand(UPPER, n - 2 * (n // 3))


@dataclass(frozen=True)
class Case:
    family: str
    text: str
    secret: str
    """The part of `text` that must be gone."""
    safe: str
    """Text of the same look that must come back unchanged."""


def _cases() -> list[Case]:
    pem_body = "\n".join(rand(B64, 64) for _ in range(3))
    putty = (
        "PuTTY-User-Key-File-" + "3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
        "Public-Lines: 2\n" + rand(B64, 64) + "\n" + rand(B64, 20) + "\nPrivate-Lines: 1\n"
        + rand(B64, 44) + "\nPrivate-MAC: " + rand(HEX, 64)
    )  # fmt: skip
    azure_key = rand(ALNUM + "+/", 86) + "=="
    sas_sig = rand(ALNUM, 40) + "%3D"
    dsn_key = rand(HEX, 32)
    webhook = "T" + rand(UPPER + DIGITS, 10) + "/B" + rand(UPPER + DIGITS, 10) + "/" + mixed(24)
    twilio = rand(HEX, 32)
    pw = mixed(14)
    word_pw = "Correct" + "Horse" + "Battery" + "Staple"
    slash_pw = "/" + rand(LOWER, 5) + rand(DIGITS, 4) + rand(UPPER, 5) + "/" + mixed(12)
    cases = [
        # --- the list -------------------------------------------------------------
        Case(
            "azure-storage",
            "DefaultEndpointsProtocol=https;AccountName=acct;Account"
            + f"Key={azure_key};EndpointSuffix=core.windows.net",
            azure_key,
            "AccountKey=<storage-account-key>;AccountName=acct",
        ),
        Case(
            "azure-sas",
            "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&si" + f"g={sas_sig}",
            sas_sig,
            "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sig=<signature>",
        ),
        Case("url-password", f"redis://:{pw}@cache.internal:6379/0", pw, "redis://cache:6379/0"),
        Case(
            "url-password",
            "postgres://app:" + (p := rand(ALNUM, 8) + "/" + rand(ALNUM, 9) + "+x") + "@db/app",
            p,
            "see http://localhost:3000/users/ana@example.com and "
            "https://registry.npmjs.org:443/@scope/pkg",
        ),
        Case(
            "url-token",
            f"git clone https://{(t := mixed(32))}@github.com/org/repo.git",
            t,
            "git clone https://deploy-bot@github.com/org/repo.git",
        ),
        Case("named", f"PWD={pw}", pw, "PWD=/home/ana/project"),
        Case("named", f"DB_PASS={pw}\n", pw, "DB_PASS=${DB_PASS}\n"),
        Case("named", f"export AUTH={pw}", pw, "AUTH=<token>"),
        Case("named", f"STRIPE_KEY={(k := mixed(32))}", k, "STRIPE_KEY=xxx"),
        Case("named", f"PASSWORD={word_pw}", word_pw, "PASSWORD=<your password>"),
        Case("named", f"SECRET_TOKEN={slash_pw}", slash_pw, "SSL_KEY=/etc/ssl/private/server.key"),
        Case(
            "slack",
            "xapp" + f"-1-A{(a := rand(UPPER + DIGITS, 10))}-{rand(DIGITS, 13)}-{rand(HEX, 64)}",
            a,
            "the xapp-level token goes in SLACK_APP_TOKEN",
        ),
        Case(
            "slack-webhook",
            f"curl -X POST https://hooks.slack.com/services/{webhook}",
            webhook,
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
        Case("stripe", (w := "wh" + "sec_" + mixed(32)), w, "wh" + "sec_" + "x" * 32),
        Case("google-oauth", (g := "GOC" + "SPX-" + mixed(28)), g, "GOC" + "SPX-<client-secret>"),
        Case("private-key", putty, putty, "PuTTY-User-Key-File-N: is the first line"),
        Case(
            "sentry",
            f"SENTRY_DSN=https://{dsn_key}@o{rand(DIGITS, 6)}.ingest.sentry.io/{rand(DIGITS, 7)}",
            dsn_key,
            "dsn: https://public@sentry.example.com/1",
        ),
        Case(
            "curl-user",
            f"curl -u deploy:{pw} https://api.example.com/v1/items",
            pw,
            "curl -u $USER:$PASS https://api.example.com && curl -u user:password http://h",
        ),
        Case("twilio", "S" + "K" + twilio, "S" + "K" + twilio, "TASK" + twilio),
        # --- gitleaks' default rules, the families a coding transcript holds ---------------
        Case(
            "private-key",
            "-----BEGIN " + "EC PRIVATE KEY-----\n" + pem_body + "\n-----END EC PRIVATE KEY-----",
            pem_body,
            "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----",
        ),
        Case(
            "private-key",
            (s := "AGE-SECRET-" + "KEY-1" + rand(BECH32.upper(), 58)),
            s,
            "age1" + rand(BECH32, 58),
        ),
        Case(
            "jwt",
            (s := "ey" + "J" + mixed(20) + ".ey" + "J" + mixed(30) + "." + mixed(43)),
            s,
            "eyJ0eXAiOiJKV1QifQ is only a header",
        ),
        Case("grafana", (s := "eyJrIjoi" + mixed(60)), s, "glc_" + "x" * 40),
        Case("grafana", (s := "gl" + "sa_" + mixed(32) + "_" + rand(HEX, 8)), s, "glsa_id"),
        Case("aws-akia", (s := "AK" + "IA" + rand(UPPER + DIGITS, 16)), s, "AKIA" + "lowercase"),
        Case(
            "aws-secret",
            f"aws_secret_access_key = {(s := rand(ALNUM + '/+', 40))}",
            s,
            "aws_secret_access_key = ${AWS_SECRET}",
        ),
        Case("azure-ad", (s := "ab" + "c8Q~" + mixed(34)), s, "press Q~ to quit"),
        Case("alibaba", (s := "LT" + "AI" + mixed(20)), s, "LTAI5 is a prefix"),
        Case("digitalocean", (s := "dop" + "_v1_" + rand(HEX, 64)), s, "dop_v1_<token>"),
        Case("github-pat", (s := "github" + "_pat_" + mixed(82)), s, "github_pat_<token>"),
        Case("gh-token", (s := "gh" + "o_" + mixed(36)), s, "commit " + rand(HEX, 40)),
        Case("glpat", (s := "gl" + "pat-" + mixed(20)), s, "gl" + "pat-" + "x" * 20),
        Case("gitlab", (s := "gl" + "rt-" + mixed(20)), s, "glrt-<runner-token>"),
        Case("atlassian", (s := "ATA" + "TT3" + mixed(186)), s, "ATATT3 tokens start so"),
        Case("atlassian", (s := "AT" + "BB" + mixed(28)), s, "ATBB app passwords"),
        Case("npm", (s := "npm" + "_" + mixed(36)), s, "npm_config_cache=/tmp/npm"),
        Case("pypi", (s := "pypi-" + "AgEIcHlwaS5vcmc" + mixed(60)), s, "pypi-package-name"),
        Case("rubygems", (s := "rubygems" + "_" + rand(HEX, 48)), s, "rubygems_version"),
        Case("nuget", (s := "oy" + "2" + rand(LOWER + DIGITS, 43)), s, "oy2 is short"),
        Case("docker", (s := "dckr" + "_pat_" + mixed(27)), s, "dckr" + "_pat_" + "x" * 27),
        Case("slack", (s := "xox" + "b-" + rand(DIGITS, 12) + "-" + mixed(24)), s, "xoxb-<bot>"),
        Case(
            "discord-webhook",
            "https://discord.com/api/webhooks/" + (s := rand(DIGITS, 18) + "/" + mixed(68)),
            s,
            "https://discord.com/api/webhooks/{id}/{token}",
        ),
        Case("telegram", (s := rand(DIGITS, 10) + ":AA" + mixed(33)), s, "12:30 AAA meeting"),
        Case("sendgrid", (s := "SG" + "." + mixed(22) + "." + mixed(43)), s, "SG.example"),
        Case("mailgun", (s := "ke" + "y-" + rand(HEX, 32)), s, "monkey-" + rand(HEX, 32)),
        Case("mailchimp", (s := rand(HEX, 32) + "-us" + "14"), s, "locale en-us1"),
        Case("stripe", (s := "sk" + "_live_" + mixed(24)), s, "pk_live_" + mixed(24)),
        Case("stripe", (s := "rk" + "_prod_" + mixed(24)), s, "rk_prod_short"),
        Case("square", (s := "sq0" + "atp-" + mixed(22)), s, "sq0atp-<token>"),
        Case("square", (s := "EA" + "AA" + mixed(60)), s, "EAAA is a prefix"),
        Case(
            "paypal",
            (s := "access_token$" + "production$" + rand(LOWER + DIGITS, 16) + "$" + rand(HEX, 32)),
            s,
            "access_token$production$<id>",
        ),
        Case("shopify", (s := "shp" + "at_" + rand(HEX, 32)), s, "shpat_" + "x" * 32),
        Case("sk-proj", (s := "sk" + "-proj-" + mixed(48)), s, "use an sk-... key"),
        Case("sk-ant", (s := "sk" + "-ant-api03-" + mixed(93) + "AA"), s, "task-runner-manifest"),
        Case("hf", (s := "hf" + "_" + rand(LOWER + UPPER, 34)), s, "hf_hub_download"),
        Case("hf", (s := "api" + "_org_" + rand(LOWER + UPPER, 34)), s, "api_org_name"),
        Case("groq", (s := "gsk" + "_" + mixed(52)), s, "gsk_<key>"),
        Case("replicate", (s := "r8" + "_" + mixed(37)), s, "r8_short"),
        Case("vault", (s := "hv" + "s." + mixed(90)), s, "hvs.<token>"),
        Case("databricks", (s := "da" + "pi" + rand(HEX, 32)), s, "dapi is a prefix"),
        Case("heroku", (s := "HR" + "KU-AA" + mixed(58)), s, "HRKU-<key>"),
        Case("linear", (s := "lin" + "_api_" + mixed(40)), s, "lin_api_<key>"),
        Case("notion", (s := "nt" + "n_" + rand(DIGITS, 11) + mixed(35)), s, "ntn_<token>"),
        Case("notion", (s := "sec" + "ret_" + mixed(43)), s, "secret_key_base"),
        Case("doppler", (s := "dp" + ".pt." + mixed(43)), s, "dp.pt.<token>"),
        Case("pulumi", (s := "pu" + "l-" + rand(HEX, 40)), s, "pul-request"),
        Case(
            "terraform",
            (s := mixed(14) + ".atlas" + "v1." + mixed(67)),
            s,
            "app.terraform.io uses .atlasv1. tokens",
        ),
        Case(
            "postman",
            (s := "PM" + "AK-" + rand(HEX, 24) + "-" + rand(HEX, 34)),
            s,
            "PMAK-<key>",
        ),
        Case("newrelic", (s := "NR" + "AK-" + rand(UPPER + DIGITS, 27)), s, "NRAK-<key>"),
        Case("sentry", (s := "sntry" + "u_" + rand(HEX, 64)), s, "sntryu_<token>"),
        Case("supabase", (s := "sb" + "p_" + rand(HEX, 40)), s, "sbp_<token>"),
        Case("flyio", (s := "fo" + "1_" + mixed(43)), s, "fo1_<token>"),
        Case(
            "bearer",
            f"Authorization: Bearer {(s := mixed(40))}",
            s,
            "Bearer authentication is required; see SPL-Token Command-line Utility",
        ),
        Case(
            "bearer",
            f'curl -H "authorization: token {(s := mixed(40))}" https://api.example.com',
            s,
            'headers = {"Authorization": f"Bearer {token}"}',
        ),
        Case(
            "named",
            f'{{"DATABRICKS_TOKEN": "{(s := rand(LOWER + DIGITS, 30))}", "debug": true}}',
            s,
            'token = os.environ["API_KEY"]',
        ),
        Case(
            "named",
            f"okta:\n  api_token: {(s := '00' + mixed(40))}\n",
            s,
            "token: ${TOKEN}\n",
        ),
        Case("named", f"DD_API_KEY={(s := rand(HEX, 32))}", s, "API_KEY=xxx"),
        Case(
            "named",
            f'os.environ["DB_PASSWORD"] = "{(s := mixed(16))}"',
            s,
            'password = os.environ["DB_PASSWORD"]',
        ),
        Case(
            "aws-secret",
            f'os.environ["AWS_SECRET_ACCESS_KEY"] = "{(s := rand(ALNUM, 40))}"',
            s,
            'os.environ["AWS_SECRET_ACCESS_KEY"]',
        ),
        Case(
            "aws-secret",
            f"- Secret Access Key: `{(s := rand(ALNUM + '/+', 40))}`",
            s,
            "- Secret Access Key: `<from the console>`",
        ),
        Case(
            "named",
            f"  password: {(s := rand(LOWER, 7))}\n",
            s,
            "  password: changeme\n  password: hashedPassword\n",
        ),
        Case(
            "named",
            f"mysql --password='{(s := mixed(12))}' -h db",
            s,
            "mysql --password-stdin < pw.txt --tokenizer EleutherAI/gpt-neox-20b",
        ),
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}:{c.text[:14]!r}")
def test_the_family_is_redacted_and_counted(case: Case) -> None:
    r = redact(f"line before\n{case.text}\nline after")
    assert case.secret not in r.text
    assert r.families.get(case.family, 0) >= 1, r
    assert f"[REDACTED:{case.family}]" in r.text
    assert r.text.startswith("line before\n") and r.text.endswith("\nline after")
    assert case.family in FAMILY_LABELS


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}:{c.safe[:14]!r}")
def test_the_look_alike_placeholder_or_word_stays(case: Case) -> None:
    assert redact(case.safe) == (case.safe, 0, {})


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD=<your password>",
        "API_KEY=xxx",
        "API_KEY=xxxxxxxxxxxxxxxx",
        "token: ${TOKEN}",
        "token: {{ secrets.TOKEN }}",
        "password: changeme",
        "POSTGRES_PASSWORD=password",
        "DJANGO_SECRET_KEY=your-secret-key-here",
        'api_key = os.environ["API_KEY"]',
        "api_key = os.getenv('API_KEY')",
        "const apiKey = process.env.OPENAI_API_KEY;",
        "password = user_password",
        "secret = config.secret_value",
        "password: str = Field(...)",
        "credentials: 'include'",
        "OPENAI_API_KEY=sk-...",
        "SECRET_KEY_FILE=/run/secrets/django_key",
        "GOOGLE_APPLICATION_CREDENTIALS=/home/ana/.config/gcloud/app.json",
        "max_tokens: 128000000",
        "Estimated total tokens: 63761790",
        "cache_key = 'user-42-profile-v2-abcdef'",
        '"file_key": "AbC123dEf456GhI789jKl0"',
        "next_page_token: CAESBggCEAEYAQ",
        "request_id=" + "123e4567-e89b-12d3-a456-426614174000",
        "commit " + "9fceb02d0ae598e95dc970b74767f19372d61af8",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
        "use anchor_spl::associated_token::AssociatedToken;",
        "vaultTokenAccount: vaultUsdc.toBase58(),",
        "jdbc:mysql://localhost:3306/app?user=root&password=&useSSL=false",
        "nacos://10.20.0.100:8848?username=&password=&namespace=",
    ],
)
def test_placeholders_references_and_ordinary_values_stay(text: str) -> None:
    assert redact(text) == (text, 0, {})


def test_every_new_family_has_a_case() -> None:
    """The table above covers every label `redact` can count, bar the ones the older tests
    (test_redact.py) cover family by family."""
    covered = {c.family for c in CASES}
    older = {"known", "sk-or-v1", "sk", "nia", "google-api", "nostr-nsec", "pplx", "xai"}
    older |= {"sakana", "keenable"}
    assert set(FAMILY_LABELS) - covered <= older


def test_a_sentry_dsn_keeps_its_host_and_project() -> None:
    key = rand(HEX, 32)
    r = redact(f"dsn=https://{key}@o12345.ingest.sentry.io/678")
    assert r.text == "dsn=https://[REDACTED:sentry]@o12345.ingest.sentry.io/678"


def test_a_url_password_with_a_slash_goes_whole() -> None:
    secret = rand(ALNUM, 10) + "/" + rand(ALNUM, 10)
    r = redact(f"DATABASE_URL=postgres://app:{secret}@db.internal:5432/app")
    assert r.text == "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app"


def test_a_quoted_password_with_spaces_goes_whole() -> None:
    phrase = " ".join(rand(LOWER, 6) for _ in range(4))
    r = redact(f'PASSWORD="{phrase}"')
    assert r.text == 'PASSWORD="[REDACTED:named]"'


def test_a_secret_already_masked_is_not_counted_again() -> None:
    once = redact("DB_PASSWORD=" + mixed(16) + " postgres://u:" + mixed(12) + "@h/db")
    assert redact(once.text) == (once.text, 0, {})
