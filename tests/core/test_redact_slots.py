"""Secret-named slots in every config shape a session prints: for each labelled shape, 200
random values are embedded and none may survive; beside them, look-alikes that must come back
byte for byte (`bench/redact_slots.py` prints the per-shape survival table).

Values are drawn at run time from a seeded generator: 8 to 40 chars of letters, digits and
`-_/+=.` (a shape whose syntax or key takes only tokens draws from `SPELLING`), so no
key-shaped literal is committed. Every shape is also redacted as a judge sees a tool call's
arguments: JSON-encoded inside a string.
"""

from __future__ import annotations

import json
import random
import re
import string

import pytest

from factrail.core.redact import redact, secret_spans
from factrail.core.redact.escapes import Unescaped
from factrail.core.redact.names import credential_tier

ALPHABET = string.ascii_letters + string.digits + "-_/+=."
TOKEN = string.ascii_letters + string.digits + "-"
"""A URL-safe token: what a URL's user or a `?key=` holds, and what a name that takes only
random-looking values (`*_pat`, `jwt`, a bare `*_KEY`) is tested with, 16 chars or more."""
PUNCT = string.ascii_letters + string.digits + "!#%^*-_+=.~@"
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
    # any key one of whose words names a credential (camel case, `_`, `-`, `.`)
    "env vpn_passcode=": "vpn_passcode={v}\n",
    "env github_pat= (token)": "github_pat={v}\n",
    "env smtp_cred=": "smtp_cred={v}\n",
    "env jwt= (token)": "jwt={v}\n",
    "env db_password= punctuated": "db_password={v}\n",
    "yaml dbPass: (camel case)": "dbPass: {v}\n",
    "env userPwd=": "userPwd={v}\n",
    "tfvars db_passcode": 'db_passcode = "{v}"\n',
    "ini auth_code": "[oauth]\nauth_code = {v}\n",
    "json jwt (token)": '{{"jwt": "{v}"}}',
    # value forms: block scalars, anchors and tags, multi-line strings, escaped JSON
    "yaml password: |": "credentials:\n  password: |\n    {v}\n  user: app\n",
    "yaml token: >-": "api:\n  token: >-\n    {v}\n",
    "yaml anchor &sk": "defaults: &defaults\n  secret_key: &sk {v}\n",
    "yaml tag !!str": "db:\n  password: !!str {v}\n",
    "toml triple double quotes": '[db]\npassword = """{v}"""\n',
    "toml triple single quotes, multi-line": "[api]\ntoken = '''\n{v}\n'''\n",
    "json escaped in a string": '"{{\\"password\\": \\"{v}\\"}}"',
    # key/value pair objects whose name field names a credential
    "k8s env name/value": "env:\n  - name: DB_PASSWORD\n    value: {v}\n"
    "  - name: LOG\n    value: x\n",
    "k8s env, value quoted": 'env:\n- name: API_TOKEN\n  value: "{v}"\n',
    "kubeconfig exec env": "users:\n- name: ci\n  user:\n    exec:\n      env:\n"
    "      - name: TOKEN\n        value: {v}\n",
    "ecs json name/value": '{{"environment": [{{"name": "DB_PASSWORD", "value": "{v}"}}]}}',
    "postman key/value": '{{"key": "api_token", "value": "{v}", "enabled": true}}',
    "postman key/value, pretty": '{{\n  "key": "api_token",\n  "value": "{v}",\n  "type": "x"\n}}',
    "aws ParameterKey=,ParameterValue=": "aws cloudformation deploy --parameters "
    "ParameterKey=DbPassword,ParameterValue={v}\n",
    # URLs: a bare `key`, an OAuth `code`, a token as the user
    "url &key= (token)": "https://maps.example.com/api/geocode?address=main+st&key={v}",
    "url ?code= (token)": "https://app.example.com/oauth/cb?code={v}&state=af0ifj",
    "url https://TOKEN@ (token)": "git clone https://{v}@github.com/org/repo.git\n",
    # cookies wherever written
    "cookie jar line": ".example.com\tTRUE\t/\tTRUE\t0\tsessionid\t{v}\n",
    "cookie jar #HttpOnly_": "#HttpOnly_.example.com\tTRUE\t/\tTRUE\t1767225600\tauth\t{v}\n",
    "curl -b 'sid=…'": "curl -b 'sid={v}' https://app.example.com/me\n",
    'curl --cookie "…; session=…"': 'curl --cookie "lang=en; session={v}" https://a.example.com/\n',
    # Authorization with any scheme word
    "Authorization: ApiKey": "Authorization: ApiKey {v}\n",
    "Authorization: Bot": "Authorization: Bot {v}\n",
    "Authorization: SSWS": "Authorization: SSWS {v}\n",
    "Proxy-Authorization: Negotiate": "Proxy-Authorization: Negotiate {v}\n",
    "json authorization: DPoP": '{{"authorization": "DPoP {v}"}}',
    "Authorization: Digest response=": 'Authorization: Digest username="app", realm="api", '
    'nonce="n1", uri="/", response="{v}"\n',
    # a slot in grep output that also holds code: decided per line
    "grep .env beside code": "app/config.py:3:def load():\n.env:2:db_password={v}\n",
    "grep yaml beside code": "app/config.py:3:def load():\nconfig.yaml:7:  password: {v}\n",
    "grep cfg beside code": "app/config.py:3:def load():\nsetup.cfg:9:token = {v}\n",
}
"""Each labelled shape: a text with one `{v}` slot (JSON braces doubled)."""
SPELLING: dict[str, tuple[str, int]] = {
    **{name: (TOKEN, 16) for name in SHAPES if "(token)" in name},
    "env db_password= punctuated": (PUNCT, 8),
}
"""The alphabet and shortest length of a shape's values, where not `ALPHABET` and 8."""

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
    # beside the shapes of a credential's words, value forms, pairs, URLs, cookies, headers
    "max_passcode_attempts: 5\ngithub_pat_expiry: 90d\njwt_issuer: https://auth.example.com\n",
    '"win32cred": "types-pywin32",\n',
    'SUBJECT_TOKEN_TYPES = {"jwt": "urn:ietf:params:oauth:token-type:jwt"}\n',
    '<assemblyIdentity name="x" publicKeyToken="6595b64144ccf1df"/>\n',
    'pat = "test_*.py"\nsid = "Orders2024"\n',
    "description: |\n  The password is rotated nightly.\n",
    "password: |\n  ${DB_PASSWORD}\n",
    "token: !Ref ApiToken\npassword: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n",
    "password: &default_pw changeme\n",
    'COPY_SIGNATURE_SCRIPT = """\ndef accept({funcname}):\n    return {funcname}\n"""\n',
    "env:\n  - name: LOG_LEVEL\n    value: debug\n",
    "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db\n"
    "        key: password\n",
    '{"name": "password", "type": "string", "required": true}\n',
    '{"key": "Content-Type", "value": "application/json"}\n',
    '<input type="password" name="password" value="">\n',
    '"{\\"password\\": \\"${DB_PASSWORD}\\"}"\n',
    "https://example.com/search?q=x&code=US&key=users/avatar.png\n",
    "git clone https://deploy-bot@github.com/org/repo.git\n",
    ".example.com\tTRUE\t/\tFALSE\t0\ttheme\tdark\n",
    "curl -b cookies.txt https://example.com\ngit checkout -b feature/session-tokens\n",
    'WWW-Authenticate: Digest realm="api", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093"\n',
    "Authorization: Bearer <token>\nAuthorization: ApiKey YOUR_API_KEY\n",
    "batch.map(sig =>\n  verify(sig)\n)\n",
    "app/auth.py:12:    password = get_password()\n.env.example:3:DB_PASSWORD=changeme\n",
)
"""Texts of the same look that hold no secret: each must come back unchanged."""

_MARKER = r"\[REDACTED:[a-z0-9-]+\]"


def random_values(
    seed: int = SEED, n: int = VALUES, alphabet: str = ALPHABET, shortest: int = 8
) -> list[str]:
    """`n` random values, `shortest` to 40 chars of `alphabet`, from a seeded generator."""
    rng = random.Random(seed)
    return [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(shortest, 40))) for _ in range(n)
    ]


def shape_values(name: str, seed: int = SEED, n: int = VALUES) -> list[str]:
    """The random values a shape is tested with."""
    alphabet, shortest = SPELLING.get(name, (ALPHABET, 8))
    return random_values(seed, n, alphabet, shortest)


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
    return {
        name: sum(survives(shape, v) for v in shape_values(name, seed, n))
        for name, shape in SHAPES.items()
    }


def survives_as_argument(shape: str, value: str) -> bool:
    """Whether `value` comes through the redaction of a tool call's arguments holding `shape`,
    as the judge state renders them (compact JSON) and as a judge payload or the decision log
    would keep them."""
    arguments = json.dumps({"command": shape.format(v=value)}, separators=(",", ":"))
    out = redact(arguments).text
    return value in out or json.dumps(value)[1:-1] in out


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_no_random_value_survives(name: str) -> None:
    survivors = [v for v in shape_values(name) if survives(SHAPES[name], v)]
    assert survivors == [], f"{len(survivors)}/{VALUES} survive, e.g. {survivors[:3]}"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_no_random_value_survives_as_a_tool_argument(name: str) -> None:
    survivors = [v for v in shape_values(name, n=50) if survives_as_argument(SHAPES[name], v)]
    assert survivors == [], f"{len(survivors)}/50 survive, e.g. {survivors[:3]}"


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_the_look_alike_stays_byte_identical(text: str) -> None:
    assert redact(text) == (text, 0, {})


def test_every_slot_is_counted_once() -> None:
    for name, shape in SHAPES.items():
        assert redact(shape.format(v=shape_values(name, n=1)[0])).count == 1, name


def test_secret_spans_are_where_the_values_are() -> None:
    """`secret_spans` maps every pass's replacement back to the text it was given: in one text
    holding every shape, the spans are exactly the values."""
    values = [shape_values(name, SEED + 1, 1)[0].replace("=", "x", 1) for name in SHAPES]
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


@pytest.mark.parametrize(
    ("name", "tier"),
    [
        ("DB_PASSWORD", "password"),
        ("slackBotToken", "secret"),
        ("X-Amz-Signature", "secret"),
        ("vpn_passcode", "password"),
        ("smtp_cred", "secret"),
        ("dbpassword", "password"),
        ("userPwd", "password"),
        ("password2", "password"),
        ("spring.datasource.password", "password"),
        ("github_pat", "key"),
        ("openai_key", "key"),
        ("apiKey", "secret"),
        ("client-key-data", "secret"),
        ("authorizationCode", "secret"),
        ("max_tokens", None),
        ("token_count", None),
        ("password_min_length", None),
        ("cache_key", None),
        ("next_page_token", None),
        ("publicKeyToken", None),
        ("pass_fds", None),
        ("tokenizer", None),
        ("bypass", None),
        ("win32cred", None),
        ("account_sid", None),
        ("utf_8_sig", None),
        ("jwt_issuer", None),
        ("secretKeyRef", None),
        ("key", None),
        ("code", None),
    ],
)
def test_a_key_names_a_credential_by_its_words(name: str, tier: str | None) -> None:
    assert credential_tier(name) == tier


def test_a_bare_key_or_code_names_a_credential_in_a_url_query() -> None:
    assert credential_tier("key", "query") == credential_tier("code", "query") == "key"


def test_the_escaped_view_maps_back_to_the_text() -> None:
    text = r"a\"b\nc\\d\te"
    un = Unescaped(text)
    assert un.view == 'a"b\nc\\d\te'
    pieces = [text[un.back(i) : un.back(i + 1)] for i in range(len(un.view))]
    assert pieces == ["a", r"\"", "b", r"\n", "c", "\\\\", "d", r"\t", "e"]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_the_look_alike_stays_as_a_tool_argument(text: str) -> None:
    arguments = json.dumps({"command": text}, separators=(",", ":"))
    assert redact(arguments) == (arguments, 0, {})
