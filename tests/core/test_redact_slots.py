"""Secret-named slots in every config shape a session prints: for each labelled shape, 200
random values are embedded and none may survive; beside them, look-alikes that must come back
byte for byte (`bench/redact_slots.py` prints the per-shape survival table).

Values are drawn at run time from a seeded generator: 8 to 40 chars of letters, digits and
`-_/+=.`, so no key-shaped literal is committed.
"""

from __future__ import annotations

import random
import re
import string

import pytest

from factrail.core.redact import redact, secret_spans

ALPHABET = string.ascii_letters + string.digits + "-_/+=."
SEED = 35
VALUES = 200

SHAPES: dict[str, str] = {
    # .env and shell
    "env API_KEY=": "API_KEY={v}\nDEBUG=true\n",
    "env api_key= (lower)": "api_key={v}\n",
    "env export token=": "export token={v}\n",
    "env DB_PASSWORD=": "DB_HOST=db\nDB_PASSWORD={v}\n",
    "env github_token=": "github_token={v}\n",
    "env PASS=": "PASS={v}\n",
    "env pwd=": "pwd={v}\n",
    # INI and my.cnf
    "ini password = ": "[database]\nhost = db\npassword = {v}\n",
    "ini passwd=": "[auth]\npasswd={v}\n",
    "my.cnf [client]": "[client]\nuser=root\npassword={v}\nhost=127.0.0.1\n",
    "ini secret_key": "[app]\nsecret_key = {v}\n",
    # YAML
    "yaml password:": "password: {v}\n",
    "yaml token: quoted": 'token: "{v}"\n',
    "yaml nested db: password:": "db:\n  host: db.internal\n  password: {v}\n  port: 5432\n",
    "yaml client_secret: single-quoted": "oauth:\n  client_secret: '{v}'\n",
    "yaml pwd:": "pwd: {v}\n",
    "yaml db_pass:": "db_pass: {v}\n",
    "yaml auth:": "auth: {v}\n",
    "yaml credentials:": "credentials: {v}\n",
    "yaml slackBotToken:": "slackBotToken: {v}\n",
    "yaml dsn:": "sentry:\n  dsn: {v}\n",
    "kubeconfig token:": "users:\n- name: ci\n  user:\n    token: {v}\n",
    "kubeconfig client-key-data:": "users:\n- name: ci\n  user:\n    client-key-data: {v}\n",
    # TOML
    "toml api_key": '[service]\napi_key = "{v}"\n',
    "toml password": "[database]\npassword = '{v}'\n",
    # JSON
    "json password": '{{"user": "app", "password": "{v}"}}',
    "json apiKey": '{{"apiKey": "{v}"}}',
    "json access_token": '{{"access_token": "{v}", "token_type": "bearer"}}',
    "json client_secret": '{{"client_id": "app", "client_secret": "{v}"}}',
    "json sessionid": '{{"sessionid": "{v}"}}',
    # URL query strings and fragments
    "url ?api_key=": "https://api.example.com/v1/items?api_key={v}&page=2",
    "url &token=": "https://api.example.com/v1/items?q=1&token={v}",
    "url #access_token=": "https://app.example.com/cb#access_token={v}&expires_in=3600",
    "url &sig=": "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={v}",
    "url X-Amz-Signature=": "https://b.s3.amazonaws.com/k?X-Amz-Date=20240101&X-Amz-Signature={v}",
    # URL userinfo
    "url postgres://user:PASS@": "postgres://app:{v}@db.internal:5432/app",
    "url redis://:PASS@": "redis://:{v}@cache:6379/0",
    "url mysql://root:PASS@localhost": "DATABASE_URL=mysql://root:{v}@localhost/db",
    # cookies
    "Cookie: a=…": "Cookie: a={v}; theme=dark\n",
    "Cookie: …; session=…": "Cookie: lang=en; session={v}\n",
    "Set-Cookie:": "Set-Cookie: sessionid={v}; Path=/; HttpOnly; SameSite=Lax\n",
    "curl -H 'Cookie: …'": "curl -H 'Cookie: session={v}' https://api.example.com/me\n",
    "json Cookie header": '{{"headers": {{"Cookie": "sid={v}; theme=dark"}}}}',
    # Authorization headers
    "Authorization: Basic": "Authorization: Basic {v}\n",
    "Authorization: Bearer": "Authorization: Bearer {v}\n",
    "Authorization: token": "Authorization: token {v}\n",
    "authorization: bearer (lower)": "authorization: bearer {v}\n",
    "json Authorization": '{{"Authorization": "Bearer {v}"}}',
    "X-Api-Key:": "X-Api-Key: {v}\n",
    # CLI flags and code
    "--password": "mysql --password {v} -h db\n",
    "--api-key=": "tool run --api-key={v}\n",
    "kwarg api_key=": 'client = Client(api_key="{v}")\n',
}
"""Each labelled shape: a text with one `{v}` slot (JSON braces doubled)."""

LOOK_ALIKES: tuple[str, ...] = (
    "password_min_length = 12\n",
    "token_count: 512\n",
    "tokens: 4096\n",
    "passed=3 failed=0\n",
    "session_timeout=30\n",
    "max_tokens=4096\n",
    "num_tokens = 3\n",
    "def test_password_reset(client):\n    assert client.reset()\n",
    "tests/test_auth.py::test_password_reset PASSED [ 50%]\n",
    "token: null\n",
    "token: ~\n",
    "password: ''\n",
    "password: ${DB_PASSWORD}\n",
    "password: ***\n",
    "password: ********\n",
    'token: "{{ .Values.token }}"\n',
    "API_KEY=your-api-key-here\n",
    'api_key = os.environ["API_KEY"]\n',
    "dsn = os.getenv('SENTRY_DSN')\n",
    "cookie_jar = requests.cookies.RequestsCookieJar()\n",
    "Cookie: theme=dark; lang=en\n",
    "Set-Cookie: theme=dark; Path=/\n",
    "The token is refreshed every hour; the session expires after a day.\n",
    "session: 3 of 5\n",
    "First pass: parse every file\n",
    "sig = inspect.signature(fn)\n",
    "  signature: find_file <file_name> [<dir>]\n",
    "https://example.com/search?q=password&page=2\n",
    "https://example.com/cb?token_type=bearer&expires_in=3600\n",
    "postgres://localhost:5432/app\n",
    "https://example.com:8443/users/me@example.com\n",
    "Authorization: Bearer authentication is required\n",
    "cache_key = 'user-42-profile'\n",
    "    client-certificate-data: LS0tLS1CRUdJTi\n",
    "token_endpoint: https://auth.example.com/token\n",
    "secretName: tls-cert\n",
    "auth_method: basic\n",
    "credentials: 'include'\n",
    "password: str = Field(...)\n",
    "export PASSWORD_FILE=/run/secrets/db_password\n",
    "GOOGLE_APPLICATION_CREDENTIALS=/home/ana/.config/gcloud/app.json\n",
    "password = user_password\n",
    "self.token = token\n",
    "pwd: /home/ana/project\n",
    "mysql --password --host=db\n",
    # in code: names and types, not values
    "def run(\n    prompt_cache_key_resolver: PromptCacheKeyResolver | None = None,\n):\n",
    "def sign(self, private_key: SSHCertPrivateKeyTypes) -> None:\n",
    "def f(request):\n    hosted_key: HostedToolApprovalKey = request.key()\n",
    'def name(b0):\n    token = "uint_%d" % b0\n',
    "from cryptography import x509\nOID_CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH\n",
    'def load(key):\n    """encryption_key: Fernet-derived master key, such as a passphrase."""\n',
)
"""Texts of the same look that hold no secret: each must come back unchanged."""

_MARKER = r"\[REDACTED:[a-z0-9-]+\]"


def random_values(seed: int = SEED, n: int = VALUES) -> list[str]:
    """`n` random values, 8 to 40 chars of `ALPHABET`, from a seeded generator."""
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(8, 40))) for _ in range(n)]


def survives(shape: str, value: str) -> bool:
    """Whether `value` comes through the redaction of `shape` holding it: the output is not
    the shape with the value replaced, whole, by one marker (a leading `=` of the value may
    stay, read as the separator: `--password =…`)."""
    before, after = shape.split("{v}")
    expected = re.escape(before.format()) + "=?" + _MARKER + re.escape(after.format())
    out = redact(shape.format(v=value)).text
    return value in out or re.fullmatch(expected, out) is None


def survival(seed: int = SEED, n: int = VALUES) -> dict[str, int]:
    """Per labelled shape, how many of `n` random values survive."""
    values = random_values(seed, n)
    return {name: sum(survives(shape, v) for v in values) for name, shape in SHAPES.items()}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_no_random_value_survives(name: str) -> None:
    survivors = [v for v in random_values() if survives(SHAPES[name], v)]
    assert survivors == [], f"{len(survivors)}/{VALUES} survive, e.g. {survivors[:3]}"


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_the_look_alike_stays_byte_identical(text: str) -> None:
    assert redact(text) == (text, 0, {})


def test_every_slot_is_counted_once() -> None:
    value = random_values(n=1)[0]
    for name, shape in SHAPES.items():
        assert redact(shape.format(v=value)).count == 1, name


def test_secret_spans_are_where_the_values_are() -> None:
    """`secret_spans` maps every pass's replacement back to the text it was given: in one text
    holding every shape, the spans are exactly the values."""
    values = [v.replace("=", "x", 1) for v in random_values(seed=SEED + 1, n=len(SHAPES))]
    text, expected = "", []
    for value, shape in zip(values, SHAPES.values(), strict=True):
        before = shape.split("{v}")[0].format()
        expected.append((len(text) + len(before), len(text) + len(before) + len(value)))
        text += shape.format(v=value) + "\n"
    assert secret_spans(text) == expected


def test_secret_spans_follow_replacements_of_every_length() -> None:
    """A known value, a key family and a slot, each pass shifting the next one's offsets."""
    rng = random.Random(SEED)
    token = "gh" + "p_" + "".join(rng.choice(string.ascii_letters) for _ in range(36))
    known = "".join(rng.choice(string.ascii_letters) for _ in range(12))
    password = "".join(rng.choice(ALPHABET) for _ in range(20)).replace("=", "x")
    text = f"a {known} b GITHUB_TOKEN={token}\npassword: {password}\nauth=Bearer x"
    spans = secret_spans(text, known=[known])
    assert [text[s:e] for s, e in spans] == [known, token, password]
