"""Security probe of a running gateway: attacks by class against real processes on loopback.

Usage: `.venv/bin/python bench/security_probe.py [--only 1,2,...] [--verbose]`

Starts a fake upstream (OpenAI chat, Responses, Anthropic Messages; every request recorded with
its method, target, headers and body), a fake Tev judge (records every call, answers a letter),
a third listener (a judge nobody configured) and `factrail serve` with the Tev judge declared
remote, a 2,000-token trigger and its state, outputs and logs in a temporary folder. Then runs
each class of probes and prints a table (class, probes, failures) and every failure with its
input:

1. fence: sessions whose only fenced call is spelled in a new way (names, shapes across chat,
   Responses and Anthropic, servers in odd fields, nested calls), past the trigger: a judge
   call for such a session is a failure. Every probe has a control of the same shape with an
   unfenced tool, which must reach the judge (else the probe is reported invalid).
2. taint identity: a session tainted, then the same head under another identity.
3. harvest: reading saved outputs without their capability; the admin routes without the key.
4. secrets: config slots with random values in tool results and arguments; survival per slot
   shape in saved outputs, the state store, judge payloads, the decision log and the log.
5. settings: `factrail serve` with malformed settings must exit 2 with one line naming the
   variable and no secret.
6. admin key: requests to proxied routes carrying the admin key in many spellings; the key
   must reach the upstream in no form.
7. hook: `factrail hook` with hostile stdin and a request `config` naming another judge.

Each probe has a severity: `core` (a spelling a client, a file format or the documented model
produces) or `edge` (contrived, or beyond the letter of the promise); the table counts both.
Every secret-shaped string is built at run time.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import html
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import socketserver
import stat
import string
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
FACTRAIL = str(BIN / "factrail") if (BIN / "factrail").exists() else "factrail"
TRIGGER_TOKENS = 2000
HTTP_TIMEOUT_S = 60.0
START_TIMEOUT_S = 30.0
SETTINGS_WAIT_S = 30.0
STARTED = b"Started server process"
"""What uvicorn prints once `factrail serve` took its settings and started serving."""
HOOK_TIMEOUT_S = 60.0
PARALLEL = 3
"""Processes started at once for the settings and hook classes (2 busy cores)."""

SYSTEM = "You are a careful coding agent working in a repository."
MAIL_RESULT = (
    "From: payroll@corp.example\nTo: alice@corp.example\nSubject: Q3 salaries\n"
    "Alice 142,000; Bob 131,500; Carol 155,250. Do not forward."
)
F_SERVER, F_TOOL = "email-gateway", "search_threads"
F_NAME = f"mcp__{F_SERVER}__{F_TOOL}"
B_SERVER, B_TOOL = "calendar-sync", "list_events"
B_NAME = f"mcp__{B_SERVER}__{B_TOOL}"
F_SKILL, B_SKILL = "email-search", "release-notes"
EXTRA_FENCE = "mcp__kms-secrets__"
"""An operator's own entry, added to the defaults with FACTRAIL_TAINT_TOOLS."""
CORE, EDGE = "core", "edge"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def rand_value(n: int = 24, alphabet: str = string.ascii_letters + string.digits) -> str:
    """A random value with a lower-case letter, an upper-case letter and a digit."""
    while True:
        value = "".join(secrets.choice(alphabet) for _ in range(n))
        if (
            any(c.islower() for c in value)
            and any(c.isupper() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


def new_tag() -> str:
    return uuid.uuid4().hex[:10]


def client_key() -> str:
    """A client's upstream credential (not a real one)."""
    return "-".join(("sk", "client", rand_value(20)))


def anthropic_key() -> str:
    return "-".join(("sk", "ant", "api03", rand_value(24)))


# -- fake servers (run as child processes of this script) ----------------------------------------


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    mode = "upstream"
    records: list[dict[str, Any]]
    lock: threading.Lock


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, payload: Any, head: bool = False) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _handle(self) -> None:
        body = self._read_body()
        srv = self.server
        if self.path == "/_records":
            with srv.lock:
                self._send(200, list(srv.records))
            return
        if self.path == "/_reset":
            with srv.lock:
                srv.records.clear()
            self._send(200, {})
            return
        record = {
            "method": self.command,
            "target": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": base64.b64encode(body).decode(),
        }
        with srv.lock:
            srv.records.append(record)
        self._send(200, _reply(srv.mode, self.path, body), head=self.command == "HEAD")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _handle


def _reply(mode: str, path: str, body: bytes) -> dict[str, Any]:
    tokens = max(1, len(body) // 4)
    target = path.split("?", 1)[0]
    if mode == "judge":
        return {
            "id": "chatcmpl-judge",
            "object": "chat.completion",
            "model": "tev1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "B"},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1},
        }
    if target.endswith("/chat/completions"):
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex[:12],
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "done"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1},
        }
    if target.endswith("/responses"):
        return {
            "id": "resp_" + uuid.uuid4().hex,
            "object": "response",
            "status": "completed",
            "model": "gpt-4o",
            "output": [
                {
                    "type": "message",
                    "id": "msg_" + uuid.uuid4().hex[:12],
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}],
                }
            ],
            "usage": {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1},
        }
    if target.endswith("/messages"):
        return {
            "id": "msg_" + uuid.uuid4().hex[:12],
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "done"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": tokens, "output_tokens": 1},
        }
    return {"object": "list", "data": []}


def serve_fake(mode: str, port: int) -> None:
    server = _Server(("127.0.0.1", port), _Handler)
    server.mode = mode
    server.records = []
    server.lock = threading.Lock()
    server.serve_forever()


# -- processes ------------------------------------------------------------------------------------


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@dataclass
class Fake:
    """One fake server process (upstream or judge) and its records."""

    mode: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Fake:
        self.port = free_port()
        args = [sys.executable, __file__, "--fake", self.mode, "--port", str(self.port)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(self.base + "/_records", self.proc)
        return self

    def records(self) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = httpx.get(self.base + "/_records", timeout=30).json()
        for r in data:
            r["raw"] = base64.b64decode(r["body"])
        return data

    def reset(self) -> None:
        httpx.post(self.base + "/_reset", timeout=30)

    def close(self) -> None:
        if self.proc is not None:
            stop(self.proc)


def clean_env() -> dict[str, str]:
    """This process's environment without any FACTRAIL_* variable."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("FACTRAIL")}


@dataclass
class Gateway:
    """`factrail serve` on loopback with its own folders."""

    home: Path
    upstream: Fake
    judge: Fake
    judge_key: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    admin_key: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state_dir(self) -> Path:
        return self.home / "state"

    @property
    def outputs_dir(self) -> Path:
        return self.home / "outputs"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def stderr_path(self) -> Path:
        return self.home / "gateway.stderr"

    def start(self) -> Gateway:
        self.port = free_port()
        self.home.mkdir(mode=0o700, parents=True)
        self.env = {
            **clean_env(),
            "XDG_DATA_HOME": str(self.data_dir),
            "XDG_CACHE_HOME": str(self.home / "cache"),
            "FACTRAIL_UPSTREAM_URL": self.upstream.base + "/v1",
            "FACTRAIL_ANTHROPIC_UPSTREAM_URL": self.upstream.base,
            "FACTRAIL_TRIGGER_TOKENS": str(TRIGGER_TOKENS),
            "FACTRAIL_REARM_TOKENS": "300",
            "FACTRAIL_PRICE_PROFILE": "none",
            "FACTRAIL_JUDGE": "tev",
            "FACTRAIL_JUDGE_URL": self.judge.base + "/v1",
            "FACTRAIL_JUDGE_API_KEY": self.judge_key,
            "FACTRAIL_JUDGE_LOCAL": "false",
            "FACTRAIL_EGRESS": "full",
            "FACTRAIL_JUDGE_DEADLINE_MS": "8000",
            "FACTRAIL_STATE_URL": f"sqlite:///{self.state_dir / 'state.db'}",
            "FACTRAIL_OUTPUTS_DIR": str(self.outputs_dir),
            "FACTRAIL_TAINT_TOOLS": EXTRA_FENCE,
            "FACTRAIL_READ_TIMEOUT_S": "20",
            "FACTRAIL_LOG_LEVEL": "INFO",
        }
        err = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [FACTRAIL, "serve", "--port", str(self.port)],
            cwd=self.home,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        wait_http(self.base + "/healthz", self.proc)
        login = re.search(r"login\?key=(\S+)", self.stderr_path.read_text("utf-8", "replace"))
        self.admin_key = urllib.parse.unquote(login.group(1)) if login else ""
        key_file = self.state_dir / "admin.key"
        if not self.admin_key and key_file.exists():
            self.admin_key = key_file.read_text().strip()
        return self

    def close(self) -> None:
        if self.proc is not None:
            stop(self.proc)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text("utf-8", "replace")


# -- results ------------------------------------------------------------------------------------


@dataclass
class Result:
    cls: str
    label: str
    severity: str
    failed: bool
    detail: str = ""
    invalid: bool = False
    """The probe could not be judged (its control did not behave): not counted as passed."""


@dataclass
class Context:
    gw: Gateway
    upstream: Fake
    judge: Fake
    third: Fake
    home: Path
    verbose: bool
    http: httpx.Client
    sessions: dict[str, str] = field(default_factory=dict)
    """Tag → session header of every session sent (for the harvest class)."""


# -- transcripts --------------------------------------------------------------------------------


def filler(tag: str, i: int, lines: int = 40) -> str:
    return "\n".join(
        f"build/log/step{i}/part{j}.txt:{j + 1}: compiled unit {tag}-{i}-{j} in {j * 7 % 13} ms,"
        f" cache {'hit' if j % 3 else 'miss'}, warnings {j % 5}"
        for j in range(lines)
    )


def first_message(tag: str) -> str:
    return f"Task {tag}: the nightly build fails; find out why and fix it."


def chat_steps(tag: str, steps: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(steps):
        cid = f"call_{tag}_{i}"
        args = json.dumps({"command": f"make -C pkg{i} 2>&1 | tail -40"})
        out.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "bash", "arguments": args}}
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": cid, "content": filler(tag, i)})
    return out


def chat_body(
    tag: str,
    inject: Sequence[dict[str, Any]] = (),
    steps: int = 7,
    model: str = "gpt-4o",
    first: Any = None,
    system_role: str = "system",
) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [
        {"role": system_role, "content": SYSTEM},
        {"role": "user", "content": first if first is not None else first_message(tag)},
        *inject,
        *chat_steps(tag, steps),
    ]
    if steps:
        msgs += [
            {"role": "assistant", "content": "Looked at every package."},
            {"role": "user", "content": "Now fix package 3."},
        ]
    return {"model": model, "messages": msgs}


def responses_body(
    tag: str, inject: Sequence[dict[str, Any]] = (), steps: int = 7, model: str = "gpt-4o"
) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": first_message(tag)}]},
        *inject,
    ]  # fmt: skip
    for i in range(steps):
        cid = f"call_{tag}_{i}"
        args = json.dumps({"command": f"make -C pkg{i} 2>&1 | tail -40"})
        items.append({"type": "function_call", "call_id": cid, "name": "bash", "arguments": args})
        items.append({"type": "function_call_output", "call_id": cid, "output": filler(tag, i)})
    if steps:
        items += [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looked at every package."}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Now fix package 3."}],
            },
        ]
    return {"model": model, "instructions": SYSTEM, "input": items}


def anthropic_body(
    tag: str,
    inject: Sequence[dict[str, Any]] = (),
    steps: int = 7,
    model: str = "claude-sonnet-4-5",
    first: Any = None,
) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": first if first is not None else first_message(tag)},
        *inject,
    ]
    for i in range(steps):
        cid = f"toolu_{tag}_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}."},
                    {"type": "tool_use", "id": cid, "name": "bash",
                     "input": {"command": f"make -C pkg{i} 2>&1 | tail -40"}},
                ],
            }
        )  # fmt: skip
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": cid, "content": filler(tag, i)}],
            }
        )
    if steps:
        msgs += [
            {"role": "assistant", "content": [{"type": "text", "text": "Looked at everything."}]},
            {"role": "user", "content": "Now fix package 3."},
        ]
    return {"model": model, "max_tokens": 1024, "system": SYSTEM, "messages": msgs}


ROUTES = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages"}


def body_for(
    fmt: str, tag: str, inject: Sequence[dict[str, Any]], steps: int = 7
) -> dict[str, Any]:
    if fmt == "chat":
        return chat_body(tag, inject, steps)
    if fmt == "responses":
        return responses_body(tag, inject, steps)
    return anthropic_body(tag, inject, steps)


def send(
    ctx: Context,
    fmt: str,
    body: dict[str, Any] | bytes,
    headers: dict[str, str] | None = None,
    session: str | None = None,
    content_type: str = "application/json",
) -> httpx.Response:
    hdrs = {"content-type": content_type}
    if fmt == "anthropic":
        hdrs["x-api-key"] = anthropic_key()
        hdrs["anthropic-version"] = "2023-06-01"
    else:
        hdrs["authorization"] = "Bearer " + client_key()
    if session is not None:
        hdrs["x-factrail-session"] = session
    hdrs.update(headers or {})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return ctx.http.post(ctx.gw.base + ROUTES[fmt], content=data, headers=hdrs)


def judge_calls(ctx: Context) -> list[dict[str, Any]]:
    return ctx.judge.records()


# -- 1. fence -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FenceProbe:
    label: str
    fmt: str
    severity: str
    build: Callable[[bool, str], list[dict[str, Any]]]
    """(fenced, tag) → the messages or items holding the one call (and its result)."""
    note: str = ""


def chat_call(
    name: str, arguments: Any, cid: str, result: str = MAIL_RESULT
) -> list[dict[str, Any]]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": result},
    ]


def chat_raw_call(call: dict[str, Any], cid: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": MAIL_RESULT},
    ]


def resp_call(item: dict[str, Any], cid: str, output: bool = True) -> list[dict[str, Any]]:
    out = [item]
    if output:
        out.append({"type": "function_call_output", "call_id": cid, "output": MAIL_RESULT})
    return out


def anth_call(block: dict[str, Any], cid: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, block]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": cid, "content": MAIL_RESULT}],
        },
    ]


def name_probe(label: str, spelled: str, fmt: str, severity: str = CORE) -> FenceProbe:
    """The standard call of each format, its name spelled `spelled` (control: B_NAME)."""

    def build(fenced: bool, tag: str) -> list[dict[str, Any]]:
        name = spelled if fenced else B_NAME
        cid = f"call_{tag}_x"
        if fmt == "chat":
            return chat_call(name, {"query": "salary"}, cid)
        if fmt == "responses":
            item = {"type": "function_call", "call_id": cid, "name": name,
                    "arguments": json.dumps({"query": "salary"})}  # fmt: skip
            return resp_call(item, cid)
        block = {"type": "tool_use", "id": cid, "name": name, "input": {"query": "salary"}}
        return anth_call(block, cid)

    return FenceProbe(f"name {label}: {spelled!r}", fmt, severity, build)


SPELLINGS: list[tuple[str, str, str]] = [
    ("known form", F_NAME, CORE),
    ("double-colon separators", f"mcp::{F_SERVER}::{F_TOOL}", CORE),
    ("single colon", f"{F_SERVER}:{F_TOOL}", CORE),
    ("upper, dotted", "EMAIL_GATEWAY.SEARCH_THREADS", CORE),
    ("camelCase", "emailGateway__searchThreads", CORE),
    ("PascalCase with slash", "EmailGateway/SearchThreads", CORE),
    ("hyphens only", "mcp-email-gateway-search-threads", CORE),
    ("e-mail", "mcp__e-mail-gateway__search_threads", CORE),
    ("em dash", "mcp__email\u2014gateway__search_threads", CORE),
    ("functions. prefix", f"functions.{F_NAME}", CORE),
    ("word joiner", "mcp__email\u2060-gateway__search_threads", CORE),
    ("soft hyphen", "mcp__em\u00adail-gateway__search_threads", CORE),
    ("zero-width non-joiner", "mcp__emai\u200cl-gateway__search_threads", CORE),
    ("combining grapheme joiner", "mcp__email\u034f-gateway__search_threads", CORE),
    ("variation selector", "mcp__email\ufe0f-gateway__search_threads", CORE),
    ("tag character", "mcp__email\U000e0041-gateway__search_threads", CORE),
    ("full-width", "mcp__ｅｍａｉｌ－ｇａｔｅｗａｙ__search_threads", CORE),
    ("mathematical bold", "mcp__𝐞𝐦𝐚𝐢𝐥-𝐠𝐚𝐭𝐞𝐰𝐚𝐲__search_threads", CORE),
    ("circled letters", "mcp__ⓔⓜⓐⓘⓛ-gateway__search_threads", CORE),
    ("combining acute", "mcp__e\u0301mail-gateway__search_threads", CORE),
    ("Turkish upper-case dotted I", "MCP__EMAİL-GATEWAY__SEARCH_THREADS", CORE),
    ("Turkish-locale lower-case (dotless i)", "mcp__emaıl-gateway__search_threads", CORE),
    ("spaces", "mcp__Email Gateway__search threads", CORE),
    ("bare server as the name", F_SERVER, CORE),
    ("percent-encoded hyphen", "mcp__email%2Dgateway__search_threads", EDGE),
    ("Gmail dotted", "mcp__claude.ai.Gmail__search_threads", CORE),
    ("Gmail GMail hump", "claude_ai_GMail.list_messages", CORE),
    ("Gmail zero-width space", "mcp__claude_ai_G\u200bmail__list_messages", CORE),
    ("Gmail plugin-qualified", "mcp__plugin_mail_claude_ai_Gmail__send", CORE),
    ("operator entry, Kelvin sign and long s", "mcp__\u212ams-ſecrets__get", CORE),
    ("operator entry, PascalCase dotted", "KmsSecrets.getValue", CORE),
]
SPELLING_FORMATS = {
    "known form",
    "full-width",
    "zero-width non-joiner",
    "Turkish-locale lower-case (dotless i)",
    "percent-encoded hyphen",
    "camelCase",
}
"""Spellings also sent as Responses and Anthropic calls (all go as chat)."""


def shape_probes() -> list[FenceProbe]:
    P: list[FenceProbe] = []

    def server(f: bool) -> str:
        return F_SERVER if f else B_SERVER

    def tool(f: bool) -> str:
        return F_TOOL if f else B_TOOL

    def name(f: bool) -> str:
        return F_NAME if f else B_NAME

    def cid(t: str) -> str:
        return f"call_{t}_x"

    def chat_args(label: str, sev: str, tool_name: str, args: Callable[[bool], Any]) -> None:
        P.append(FenceProbe(label, "chat", sev,
                            lambda f, t: chat_call(tool_name, args(f), cid(t))))  # fmt: skip

    chat_args(
        "use_mcp_tool, arguments as a JSON string",
        CORE,
        "use_mcp_tool",
        lambda f: {"server_name": server(f), "tool_name": tool(f), "arguments": "{}"},
    )
    chat_args(
        "use_mcp_tool, arguments JSON-encoded twice",
        CORE,
        "use_mcp_tool",
        lambda f: json.dumps(json.dumps({"server_name": server(f), "tool_name": tool(f)})),
    )
    chat_args(
        "use_mcp_tool, hyphenated keys server-name/tool-name",
        EDGE,
        "use_mcp_tool",
        lambda f: {"server-name": server(f), "tool-name": tool(f)},
    )
    chat_args(
        "use_mcp_tool, upper-case keys SERVER_NAME/TOOL_NAME",
        EDGE,
        "use_mcp_tool",
        lambda f: {"SERVER_NAME": server(f), "TOOL_NAME": tool(f)},
    )
    chat_args(
        "call_tool, key mcp_server_name",
        CORE,
        "call_tool",
        lambda f: {"mcp_server_name": server(f), "name": tool(f), "arguments": {}},
    )
    chat_args(
        "multi_tool_use.parallel wrapping the call",
        CORE,
        "multi_tool_use.parallel",
        lambda f: {
            "tool_uses": [
                {"recipient_name": f"functions.{name(f)}", "parameters": {"query": "salary"}}
            ]
        },
    )
    chat_args(
        "dispatcher, server and tool nested in target{}",
        EDGE,
        "mcp_dispatch",
        lambda f: {"target": {"server": server(f), "tool": tool(f)}, "args": {}},
    )
    chat_args(
        "call_tool, server as an object",
        EDGE,
        "call_tool",
        lambda f: {"server": {"name": server(f)}, "tool": tool(f)},
    )
    chat_args(
        "generic mcp tool, server and tool in arguments",
        CORE,
        "mcp",
        lambda f: {"server": server(f), "tool": tool(f), "arguments": {}},
    )
    chat_args(
        "arguments as YAML text",
        EDGE,
        "use_mcp_tool",
        lambda f: f"server_name: {server(f)}\ntool_name: {tool(f)}\n",
    )
    chat_args(
        "arguments JSON with a BOM",
        EDGE,
        "use_mcp_tool",
        lambda f: "\ufeff" + json.dumps({"server_name": server(f), "tool_name": tool(f)}),
    )
    chat_args(
        "server nested in arguments under mcp{}",
        EDGE,
        "call_tool",
        lambda f: {"mcp": {"server": server(f)}, "tool": tool(f)},
    )
    chat_args(
        "Skill, arguments a bare JSON string",
        CORE,
        "Skill",
        lambda f: json.dumps(F_SKILL if f else B_SKILL),
    )

    P.append(
        FenceProbe(
            "chat tool call, server in a sibling server_id field",
            "chat",
            EDGE,
            lambda f, t: chat_raw_call(
                {
                    "id": cid(t),
                    "type": "function",
                    "server_id": server(f),
                    "function": {"name": tool(f), "arguments": "{}"},
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "chat tool call of type mcp, nested mcp{server,name}",
            "chat",
            CORE,
            lambda f, t: chat_raw_call(
                {
                    "id": cid(t),
                    "type": "mcp",
                    "mcp": {"server": server(f), "name": tool(f), "arguments": "{}"},
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "legacy function_call with a role function result",
            "chat",
            CORE,
            lambda f, t: [
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": name(f), "arguments": "{}"},
                },
                {"role": "function", "name": name(f), "content": MAIL_RESULT},
            ],
        )
    )
    P.append(
        FenceProbe(
            "Anthropic tool_use block inside a chat message",
            "chat",
            CORE,
            lambda f, t: [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": cid(t), "name": name(f), "input": {}}],
                },
                {"role": "user", "content": MAIL_RESULT},
            ],
        )
    )
    P.append(
        FenceProbe(
            "tool result naming the tool, its call trimmed",
            "chat",
            CORE,
            lambda f, t: [
                {"role": "tool", "tool_call_id": cid(t), "name": name(f), "content": MAIL_RESULT}
            ],
        )
    )

    def xml(f: bool, upper: bool = False, attrs: bool = False) -> str:
        if attrs:
            return (
                f'<use_mcp_tool server_name="{server(f)}" tool_name="{tool(f)}">'
                "<arguments>{}</arguments></use_mcp_tool>"
            )
        s, tn = ("SERVER_NAME", "TOOL_NAME") if upper else ("server_name", "tool_name")
        return (
            f"<use_mcp_tool>\n<{s}>{server(f)}</{s}>\n<{tn}>{tool(f)}</{tn}>\n"
            "<arguments>{}</arguments>\n</use_mcp_tool>"
        )

    for label, sev, kw in (
        ("Cline use_mcp_tool XML in assistant text", CORE, {}),
        ("Cline XML, upper-case tags", EDGE, {"upper": True}),
        ("Cline XML, server and tool as attributes", EDGE, {"attrs": True}),
    ):
        P.append(FenceProbe(label, "chat", sev,
                            lambda f, t, kw=kw: [  # type: ignore[misc]
                                {"role": "assistant", "content": xml(f, **kw)},
                                {"role": "user", "content": "[use_mcp_tool] Result:\n"
                                 + MAIL_RESULT}]))  # fmt: skip
    P.append(
        FenceProbe(
            "Claude XML <invoke name=...> in assistant text",
            "chat",
            EDGE,
            lambda f, t: [
                {
                    "role": "assistant",
                    "content": f'<function_calls><invoke name="{name(f)}">'
                    '<parameter name="query">salary</parameter></invoke>'
                    "</function_calls>",
                },
                {"role": "user", "content": MAIL_RESULT},
            ],
        )
    )
    # Responses
    P.append(
        FenceProbe(
            "Responses function_call with namespace",
            "responses",
            CORE,
            lambda f, t: resp_call(
                {
                    "type": "function_call",
                    "call_id": cid(t),
                    "namespace": server(f),
                    "name": tool(f),
                    "arguments": "{}",
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Responses mcp_call, server_label with a space",
            "responses",
            CORE,
            lambda f, t: [
                {
                    "type": "mcp_call",
                    "id": "mcp_" + t,
                    "server_label": ("Email Gateway" if f else "Calendar Sync"),
                    "name": tool(f),
                    "arguments": "{}",
                    "output": MAIL_RESULT,
                }
            ],
        )
    )
    P.append(
        FenceProbe(
            "Responses custom_tool_call",
            "responses",
            CORE,
            lambda f, t: [
                {"type": "custom_tool_call", "call_id": cid(t), "name": name(f), "input": "salary"},
                {"type": "custom_tool_call_output", "call_id": cid(t), "output": MAIL_RESULT},
            ],
        )
    )
    P.append(
        FenceProbe(
            "Responses multi_tool_use.parallel",
            "responses",
            CORE,
            lambda f, t: resp_call(
                {
                    "type": "function_call",
                    "call_id": cid(t),
                    "name": "multi_tool_use.parallel",
                    "arguments": json.dumps(
                        {
                            "tool_uses": [
                                {"recipient_name": f"functions.{name(f)}", "parameters": {}}
                            ]
                        }
                    ),
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Responses mcp_call, server as an object",
            "responses",
            EDGE,
            lambda f, t: [
                {
                    "type": "mcp_call",
                    "id": "mcp_" + t,
                    "server": {"label": server(f)},
                    "name": tool(f),
                    "arguments": "{}",
                    "output": MAIL_RESULT,
                }
            ],
        )
    )
    P.append(
        FenceProbe(
            "Responses function_call_output naming the tool, call trimmed",
            "responses",
            EDGE,
            lambda f, t: [
                {
                    "type": "function_call_output",
                    "call_id": cid(t),
                    "name": name(f),
                    "output": MAIL_RESULT,
                }
            ],
        )
    )
    P.append(
        FenceProbe(
            "Responses function_call, server only in server_url",
            "responses",
            EDGE,
            lambda f, t: resp_call(
                {
                    "type": "function_call",
                    "call_id": cid(t),
                    "server_url": f"https://mcp.example.com/{server(f)}",
                    "name": tool(f),
                    "arguments": "{}",
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Responses mcp_approval_request",
            "responses",
            CORE,
            lambda f, t: [
                {
                    "type": "mcp_approval_request",
                    "id": "mcpr_" + t,
                    "server_label": server(f),
                    "name": tool(f),
                    "arguments": "{}",
                }
            ],
        )
    )
    # Anthropic
    P.append(
        FenceProbe(
            "Anthropic mcp_tool_use with server_name",
            "anthropic",
            CORE,
            lambda f, t: anth_call(
                {
                    "type": "mcp_tool_use",
                    "id": cid(t),
                    "server_name": server(f),
                    "name": tool(f),
                    "input": {},
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Anthropic tool_use, input key mcp_server_name",
            "anthropic",
            CORE,
            lambda f, t: anth_call(
                {
                    "type": "tool_use",
                    "id": cid(t),
                    "name": tool(f),
                    "input": {"mcp_server_name": server(f)},
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Anthropic tool_use, server as an object in input",
            "anthropic",
            EDGE,
            lambda f, t: anth_call(
                {
                    "type": "tool_use",
                    "id": cid(t),
                    "name": tool(f),
                    "input": {"server": {"name": server(f)}},
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Anthropic batch tool, inner calls in input.invocations",
            "anthropic",
            CORE,
            lambda f, t: anth_call(
                {
                    "type": "tool_use",
                    "id": cid(t),
                    "name": "batch",
                    "input": {"invocations": [{"name": name(f), "input": {}}]},
                },
                cid(t),
            ),
        )
    )
    P.append(
        FenceProbe(
            "Anthropic server_tool_use",
            "anthropic",
            CORE,
            lambda f, t: anth_call(
                {"type": "server_tool_use", "id": cid(t), "name": name(f), "input": {}}, cid(t)
            ),
        )
    )
    P.append(
        FenceProbe(
            "Anthropic subagent result holding <invoke name=...>",
            "anthropic",
            EDGE,
            lambda f, t: [
                *anth_call(
                    {
                        "type": "tool_use",
                        "id": cid(t),
                        "name": "Task",
                        "input": {"prompt": "summarise my inbox"},
                    },
                    cid(t),
                )[:1],
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": cid(t),
                            "content": [
                                {
                                    "type": "text",
                                    "text": f'<invoke name="{name(f)}"></invoke>\n' + MAIL_RESULT,
                                }
                            ],
                        }
                    ],
                },
            ],
        )
    )

    # skills
    def skill(label: str, sev: str, fmt: str, inp: Callable[[bool], dict[str, Any]]) -> None:
        if fmt == "anthropic":
            P.append(
                FenceProbe(
                    label,
                    fmt,
                    sev,
                    lambda f, t: anth_call(
                        {"type": "tool_use", "id": cid(t), "name": "Skill", "input": inp(f)}, cid(t)
                    ),
                )
            )
        else:
            P.append(FenceProbe(label, fmt, sev, lambda f, t: chat_call("Skill", inp(f), cid(t))))

    skill("Skill, known form", CORE, "anthropic", lambda f: {"skill": F_SKILL if f else B_SKILL})
    skill(
        "Skill, key skill_name",
        EDGE,
        "anthropic",
        lambda f: {"skill_name": F_SKILL if f else B_SKILL},
    )
    skill(
        "Skill, plugin@marketplace form",
        EDGE,
        "anthropic",
        lambda f: {"skill": (F_SKILL if f else B_SKILL) + "@team-market"},
    )
    skill(
        "Skill, display name with a space",
        EDGE,
        "chat",
        lambda f: {"skill": "Email Search" if f else "Release Notes"},
    )
    skill(
        "Skill, plugin-qualified, mixed case",
        CORE,
        "chat",
        lambda f: {"name": "mail:Email_Search" if f else "docs:Release_Notes"},
    )

    def user_turn(text: Callable[[bool], Any]) -> Callable[[bool, str], list[dict[str, Any]]]:
        return lambda f, t: [
            {"role": "user", "content": text(f)},
            {"role": "assistant", "content": "Found 3 threads."},
        ]

    P.append(
        FenceProbe(
            "slash command expanded, <command-name>",
            "anthropic",
            CORE,
            lambda f, t: [
                {"role": "assistant", "content": "Ready."},
                {
                    "role": "user",
                    "content": f"<command-name>/{F_SKILL if f else B_SKILL}</command-name>\n"
                    "<command-args>q3</command-args>",
                },
                {"role": "assistant", "content": "Found 3 threads."},
            ],
        )
    )
    P.append(
        FenceProbe(
            "slash command after a system-reminder part",
            "chat",
            EDGE,
            user_turn(
                lambda f: [
                    {"type": "text", "text": "<system-reminder>cwd is /repo</system-reminder>"},
                    {"type": "text", "text": f"/{F_SKILL if f else B_SKILL} q3 invoices"},
                ]
            ),
        )
    )
    P.append(
        FenceProbe(
            "skill loaded by reading its SKILL.md",
            "chat",
            EDGE,
            lambda f, t: chat_call(
                "read_file",
                {"path": f"/home/u/.codex/skills/{F_SKILL if f else B_SKILL}/SKILL.md"},
                cid(t),
                "# skill\nRun scripts/search.py against the mailbox.",
            ),
        )
    )
    return P


def fence_probes() -> list[FenceProbe]:
    probes: list[FenceProbe] = []
    for label, spelled, sev in SPELLINGS:
        probes.append(name_probe(label, spelled, "chat", sev))
        if label in SPELLING_FORMATS:
            probes.append(name_probe(label, spelled, "responses", sev))
            probes.append(name_probe(label, spelled, "anthropic", sev))
    return probes + shape_probes()


def run_session(ctx: Context, fmt: str, inject: list[dict[str, Any]], tag: str) -> tuple[int, str]:
    """One session past the trigger holding `inject`: judge calls it caused, and the outcome."""
    ctx.judge.reset()
    session = f"probe-{tag}"
    ctx.sessions[tag] = session
    r = send(ctx, fmt, body_for(fmt, tag, inject), session=session)
    outcome = r.headers.get("x-factrail", f"http {r.status_code}")
    return len(judge_calls(ctx)), outcome


def class_fence(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for probe in fence_probes():
        tag = new_tag()
        inject = probe.build(True, tag)
        calls, outcome = run_session(ctx, probe.fmt, inject, tag)
        ctag = new_tag()
        ccalls, coutcome = run_session(ctx, probe.fmt, probe.build(False, ctag), ctag)
        label = f"[{probe.fmt}] {probe.label}"
        detail = (
            f"judge calls {calls} (outcome {outcome}); control {ccalls} ({coutcome});"
            f" input: {json.dumps(inject, ensure_ascii=True)[:600]}"
        )
        invalid = ccalls == 0 and calls == 0
        results.append(Result("1 fence", label, probe.severity, calls > 0, detail, invalid))
        if ctx.verbose:
            log(f"  fence {label}: {calls} / control {ccalls}")
    return results


# -- 2. taint identity --------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    fmt: str
    body: Callable[[str, bool, list[dict[str, Any]]], dict[str, Any]]
    """(tag, small, inject) → body"""
    headers: dict[str, str]


@dataclass(frozen=True)
class IdentityProbe:
    label: str
    severity: str
    first: Turn
    second: Turn
    raw_first: Callable[[bytes], bytes] | None = None
    """Rewrites the first turn's bytes (a body only lenient parsers read)."""
    chain: bool = False
    """The second turn continues the first's answer (`previous_response_id`)."""


def _chat(**extra: Any) -> Callable[[str, bool, list[dict[str, Any]]], dict[str, Any]]:
    def build(tag: str, small: bool, inject: list[dict[str, Any]]) -> dict[str, Any]:
        first = extra.get("first")
        body = chat_body(
            tag,
            inject,
            steps=1 if small else 7,
            model=extra.get("model", "gpt-4o"),
            first=first(tag) if first else None,
            system_role=extra.get("system_role", "system"),
        )
        body.update(extra.get("fields", {}))
        return body

    return build


def _responses(**extra: Any) -> Callable[[str, bool, list[dict[str, Any]]], dict[str, Any]]:
    def build(tag: str, small: bool, inject: list[dict[str, Any]]) -> dict[str, Any]:
        body = responses_body(tag, inject, steps=1 if small else 7)
        body.update(extra.get("fields", {}))
        return body

    return build


def _anthropic(**extra: Any) -> Callable[[str, bool, list[dict[str, Any]]], dict[str, Any]]:
    def build(tag: str, small: bool, inject: list[dict[str, Any]]) -> dict[str, Any]:
        body = anthropic_body(
            tag, inject, steps=1 if small else 7, model=extra.get("model", "gpt-4o")
        )
        body.update(extra.get("fields", {}))
        return body

    return build


def identity_probes() -> list[IdentityProbe]:
    a, b = "{A}", "{B}"  # each run puts fresh identities in their place
    H = "x-factrail-session"
    uid = "user_" + "0" * 8 + "_account_" + str(uuid.uuid4()) + "_session_"
    out = [
        IdentityProbe("X-Factrail-Session A -> B", CORE,
                      Turn("chat", _chat(), {H: a}), Turn("chat", _chat(), {H: b})),
        IdentityProbe("no session header -> header added", CORE,
                      Turn("chat", _chat(), {}), Turn("chat", _chat(), {H: b})),
        IdentityProbe("session header -> dropped", CORE,
                      Turn("chat", _chat(), {H: a}), Turn("chat", _chat(), {})),
        IdentityProbe("prompt_cache_key A -> B", CORE,
                      Turn("chat", _chat(fields={"prompt_cache_key": a}), {}),
                      Turn("chat", _chat(fields={"prompt_cache_key": b}), {})),
        IdentityProbe("prompt_cache_key -> dropped", CORE,
                      Turn("chat", _chat(fields={"prompt_cache_key": a}), {}),
                      Turn("chat", _chat(), {})),
        IdentityProbe("Codex session_id header A -> B", CORE,
                      Turn("responses", _responses(), {"session_id": a}),
                      Turn("responses", _responses(), {"session_id": b})),
        IdentityProbe("Responses client_metadata.session_id A -> B", CORE,
                      Turn("responses", _responses(fields={"client_metadata": {"session_id": a}}),
                           {}),
                      Turn("responses", _responses(fields={"client_metadata": {"session_id": b}}),
                           {})),
        IdentityProbe("metadata.user_id session part A -> B", CORE,
                      Turn("anthropic", _anthropic(fields={"metadata": {"user_id": uid + a}}), {}),
                      Turn("anthropic", _anthropic(fields={"metadata": {"user_id": uid + b}}),
                           {})),
        IdentityProbe("metadata.user_id JSON session_id A -> B", CORE,
                      Turn("anthropic", _anthropic(fields={"metadata": {
                          "user_id": json.dumps({"session_id": a})}}), {}),
                      Turn("anthropic", _anthropic(fields={"metadata": {
                          "user_id": json.dumps({"session_id": b})}}), {})),
        IdentityProbe("x-claude-code-session-id A -> B", CORE,
                      Turn("anthropic", _anthropic(), {"x-claude-code-session-id": a}),
                      Turn("anthropic", _anthropic(), {"x-claude-code-session-id": b})),
        IdentityProbe("every identity changed at once", CORE,
                      Turn("chat", _chat(fields={"prompt_cache_key": a}),
                           {H: a, "session_id": a, "conversation_id": a}),
                      Turn("chat", _chat(fields={"prompt_cache_key": b}),
                           {H: b, "session_id": b, "conversation_id": b})),
        IdentityProbe("chat route -> Responses route, same head", CORE,
                      Turn("chat", _chat(), {H: a}), Turn("responses", _responses(), {H: b})),
        IdentityProbe("chat route -> Anthropic route, same model and head", EDGE,
                      Turn("chat", _chat(), {H: a}), Turn("anthropic", _anthropic(), {H: b})),
        IdentityProbe("model gpt-4o -> gpt-4o-mini (same family)", CORE,
                      Turn("chat", _chat(), {H: a}),
                      Turn("chat", _chat(model="gpt-4o-mini"), {H: b})),
        IdentityProbe("first user message as text parts, same text", CORE,
                      Turn("chat", _chat(), {H: a}),
                      Turn("chat", _chat(first=lambda t: [{"type": "text",
                                                           "text": first_message(t)}]), {H: b})),
        IdentityProbe("system role -> developer role, same text", EDGE,
                      Turn("chat", _chat(), {H: a}),
                      Turn("chat", _chat(system_role="developer"), {H: b})),
        IdentityProbe("tainting turn forwarded unread (NaN temperature), then dropped", EDGE,
                      Turn("chat", _chat(), {H: a}), Turn("chat", _chat(), {H: a}),
                      raw_first=lambda raw: raw[:-1] + b', "temperature": NaN}'),
        IdentityProbe("tainting turn in a gzip body, then header changed", CORE,
                      Turn("chat", _chat(), {H: a, "content-encoding": "gzip"}),
                      Turn("chat", _chat(), {H: b})),
        IdentityProbe("Responses chain: previous_response_id continued, header changed", CORE,
                      Turn("responses", _responses(), {H: a}),
                      Turn("responses", _responses(), {H: b}), chain=True),
    ]  # fmt: skip
    return out


def _tainting_call(fmt: str, fenced: bool, tag: str) -> list[dict[str, Any]]:
    name = F_NAME if fenced else B_NAME
    cid = f"call_{tag}_m"
    if fmt == "chat":
        return chat_call(name, {"query": "salary"}, cid)
    if fmt == "responses":
        item = {"type": "function_call", "call_id": cid, "name": name, "arguments": "{}"}
        return resp_call(item, cid)
    return anth_call({"type": "tool_use", "id": cid, "name": name, "input": {}}, cid)


def _fresh(text: str, ids: dict[str, str]) -> str:
    for k, v in ids.items():
        text = text.replace(k, v)
    return text


def _identity_run(ctx: Context, probe: IdentityProbe, fenced: bool) -> tuple[int, str]:
    import gzip

    tag = new_tag()
    ids = {"{A}": "sess-" + new_tag(), "{B}": "sess-" + new_tag()}
    t1, t2 = probe.first, probe.second
    h1 = {k: _fresh(v, ids) for k, v in t1.headers.items()}
    h2 = {k: _fresh(v, ids) for k, v in t2.headers.items()}
    body1 = t1.body(tag, True, _tainting_call(t1.fmt, fenced, tag))
    raw = _fresh(json.dumps(body1), ids).encode()
    if probe.raw_first is not None:
        raw = probe.raw_first(raw)
    if h1.get("content-encoding") == "gzip":
        raw = gzip.compress(raw)
    r1 = send(ctx, t1.fmt, raw, headers=h1)
    ctx.judge.reset()
    body2 = json.loads(_fresh(json.dumps(t2.body(tag, False, [])), ids))
    if probe.chain:
        previous = r1.json().get("id", "")
        body2 = {**body2, "previous_response_id": previous}
        body2["input"] = body2["input"][1:]  # the provider keeps the history
    r2 = send(ctx, t2.fmt, body2, headers=h2)
    return len(judge_calls(ctx)), r2.headers.get("x-factrail", f"http {r2.status_code}")


def class_identity(ctx: Context) -> list[Result]:
    results = []
    for probe in identity_probes():
        calls, outcome = _identity_run(ctx, probe, True)
        ccalls, coutcome = _identity_run(ctx, probe, False)
        detail = (
            f"judge calls {calls} (outcome {outcome}); control {ccalls} ({coutcome});"
            f" turn 1 {probe.first.fmt} headers {probe.first.headers} with {F_NAME} (small),"
            f" turn 2 {probe.second.fmt} headers {probe.second.headers}, same head, call dropped"
        )
        results.append(
            Result("2 taint identity", probe.label, probe.severity, calls > 0, detail,
                   invalid=ccalls == 0 and calls == 0)
        )  # fmt: skip
        if ctx.verbose:
            log(f"  identity {probe.label}: {calls} / control {ccalls}")
    return results


# -- 4. secrets ---------------------------------------------------------------------------------

PUNCT = string.ascii_letters + string.digits + "!#%^*-_+=.~@"
SLOT_SHAPES: list[tuple[str, str, str]] = [
    (".env lower-case", "db_password={v}", CORE),
    (".env export", "export api_token={v}", CORE),
    (".env quoted", 'stripe_secret="{v}"', CORE),
    (".env spaces around =", "auth_token = {v}", CORE),
    (".env camelCase", "dbPassword={v}", CORE),
    (".env *_key", "openai_key={v}", CORE),
    (".env *_passcode", "vpn_passcode={v}", CORE),
    (".env *_pat", "github_pat={v}", CORE),
    (".env *_cred", "smtp_cred={v}", CORE),
    (".env jwt", "jwt={v}", CORE),
    (".env cmd set", "set db_password={v}", CORE),
    (".env PowerShell", '$env:api_key="{v}"', CORE),
    (".env punctuated value", "db_password={p}", CORE),
    ("properties dotted", "spring.datasource.password={v}", CORE),
    ("INI section", "[database]\nhost = db.internal\npassword = {v}", CORE),
    ("my.cnf", "[client]\nuser = app\npassword={v}", CORE),
    ("INI colon", "[auth]\ntoken: {v}", CORE),
    ("ODBC connection string", "Server=db;Database=app;Uid=sa;Pwd={v};", CORE),
    ("YAML plain", "database:\n  password: {v}", CORE),
    ("YAML quoted", "api:\n  token: '{v}'", CORE),
    ("YAML flow mapping", "auth: {{user: app, token: {v}}}", CORE),
    ("YAML block scalar", "credentials:\n  password: |\n    {v}", CORE),
    ("YAML anchor", "defaults:\n  secret_key: &sk {v}", EDGE),
    ("YAML tagged", "db:\n  password: !!str {v}", EDGE),
    ("YAML k8s env name/value", "env:\n  - name: DB_PASSWORD\n    value: {v}", CORE),
    ("TOML basic", '[auth]\ntoken = "{v}"', CORE),
    ("TOML literal", "[db]\npassword = '{v}'", CORE),
    ("TOML inline table", 'creds = {{ user = "app", pass = "{v}" }}', CORE),
    ("TOML multi-line", 'secret = """{v}"""', EDGE),
    ("JSON snake_case", '{{"client_secret": "{v}"}}', CORE),
    ("JSON camelCase", '{{"apiKey":"{v}"}}', CORE),
    ("JSON key/value pair (Postman)", '{{"key": "api_token", "value": "{v}", "enabled": true}}',
     CORE),
    ("JSON escaped in a string", '"{{\\"password\\":\\"{v}\\"}}"', CORE),
    ("docker config auth", '{{"auths": {{"registry.example.com": {{"auth": "{v}"}}}}}}', CORE),
    ("query api_key", "GET https://api.example.com/v1/items?api_key={v}&page=2", CORE),
    ("query bare key=", "https://maps.example.com/api/geocode?address=main+st&key={v}", CORE),
    ("fragment access_token", "https://app.example.com/cb#access_token={v}&token_type=bearer",
     CORE),
    ("query OAuth code", "https://app.example.com/oauth/cb?code={v}&state=af0ifjsldkj", EDGE),
    ("query signature", "https://b.s3.amazonaws.com/o?X-Amz-Signature={v}&X-Amz-Expires=60",
     CORE),
    ("Cookie header", "Cookie: sessionid={v}; theme=dark", CORE),
    ("Set-Cookie", "Set-Cookie: auth={v}; Path=/; HttpOnly", CORE),
    ("cookie jar (Netscape)", ".example.com\tTRUE\t/\tTRUE\t0\tsessionid\t{v}", CORE),
    ("curl -b cookie", "curl -b 'sid={v}' https://app.example.com/me", CORE),
    ("kubeconfig token", "users:\n- name: admin\n  user:\n    token: {v}", CORE),
    ("kubeconfig client-key-data", "users:\n- name: admin\n  user:\n    client-key-data: {v}",
     CORE),
    ("kubeconfig auth-provider", "    auth-provider:\n      config:\n        access-token: {v}",
     CORE),
    ("kubeconfig exec env", "    exec:\n      env:\n      - name: API_TOKEN\n        value: {v}",
     CORE),
    ("userinfo postgres", "postgres://app:{v}@db.internal:5432/app", CORE),
    ("userinfo redis, no user", "redis://:{v}@cache.internal:6379/0", CORE),
    ("userinfo, token as user", "https://{v}@github.com/org/repo.git", CORE),
    ("userinfo mongodb+srv", "mongodb+srv://app:{v}@cluster0.example.net/db", CORE),
    ("userinfo pip index", "--index-url https://__token__:{v}@pypi.example.com/simple", CORE),
    ("Authorization Bearer", "Authorization: Bearer {v}", CORE),
    ("authorization token, lower-case", "authorization: token {v}", CORE),
    ("Authorization Basic", "Authorization: Basic {v}", CORE),
    ("Authorization ApiKey scheme", "Authorization: ApiKey {v}", CORE),
    ("Authorization Bot scheme", "Authorization: Bot {v}", CORE),
    ("Authorization SSWS scheme", "Authorization: SSWS {v}", CORE),
    ("curl -H authorization", "curl -H 'authorization: Bearer {v}' https://api.example.com/x",
     CORE),
    ("x-api-key header", "x-api-key: {v}", CORE),
    ("api-key header (Azure)", "api-key: {v}", CORE),
    ("Proxy-Authorization", "Proxy-Authorization: Basic {v}", CORE),
    ("Digest response", 'Authorization: Digest username="app", nonce="n1", response="{v}"', EDGE),
    (".env lower-case, in grep output with code", "app/config.py:3:def load():\n.env:2:"
     "db_password={v}", CORE),
    ("YAML plain, in grep output with code", "app/config.py:3:def load():\nconfig.yaml:7:"
     "  password: {v}", CORE),
    ("INI, in grep output with code", "app/config.py:3:def load():\nsetup.cfg:9:token = {v}",
     CORE),
]  # fmt: skip
SINKS = ("saved outputs", "state store", "judge payloads", "decision log", "process log")
PER_SHAPE = 4
"""Values per shape per placement (tool result; call argument)."""
SLOTS_PER_STEP = 6


@dataclass
class Slot:
    shape: str
    severity: str
    placement: str
    """`result` (saved outputs, state) or `argument` (judge payloads, decision log)."""
    value: str
    marker: str
    text: str


def _make_slots() -> list[Slot]:
    slots: list[Slot] = []
    for shape, template, sev in SLOT_SHAPES:
        for placement in ("result", "argument"):
            for _ in range(PER_SHAPE):
                value = rand_value(24, PUNCT if "{p}" in template else string.ascii_letters
                                   + string.digits)  # fmt: skip
                marker = "endmark" + new_tag()
                text = template.replace("{v}", "{p}").format(p=value)
                slots.append(Slot(shape, sev, placement, value, marker, text))
    secrets.SystemRandom().shuffle(slots)
    return slots


def _windows(value: str, size: int = 12, step: int = 4) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value) - size + 1, step)]


def survival(blob: bytes, value: str) -> str | None:
    """`whole` when `value` is in `blob`, `partial` when a 12-char piece of it is, else None."""
    if value.encode() in blob:
        return "whole"
    if any(w.encode() in blob for w in _windows(value)):
        return "partial"
    return None


def _secret_session(ctx: Context, slots: list[Slot]) -> dict[str, str]:
    """Send one session holding `slots`: the tool results' and arguments' texts sent."""
    tag = new_tag()
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": first_message(tag) + " Check the deployment configs too."},
    ]
    sent: dict[str, str] = {}
    by_place: dict[tuple[str, bool], list[Slot]] = {}
    for s in slots:  # a text holding code is read as code: such slots go apart
        by_place.setdefault((s.placement, ".py:" in s.text), []).append(s)
    groups: list[tuple[str, list[Slot]]] = []
    for (place, _), items in by_place.items():
        for i in range(0, len(items), SLOTS_PER_STEP):
            groups.append((place, items[i : i + SLOTS_PER_STEP]))
    groups.sort(key=lambda g: secrets.randbelow(1000))
    for n, (place, group) in enumerate(groups):
        cid = f"call_{tag}_{n}"
        blocks = "\n".join(f"{s.text}\n# {s.marker}" for s in group)
        if place == "result":
            args = {"command": f"cat deploy/conf{n}/* 2>/dev/null"}
            result = f"{filler(tag, n, 15)}\n{blocks}\n{filler(tag, n + 50, 15)}"
        else:
            args = {"command": f"cat > deploy/conf{n}/app.env <<'EOF'\n{blocks}\nEOF"}
            result = filler(tag, n, 40)
        sent[cid] = result
        msgs.append({"role": "assistant", "content": f"Step {n}.", "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "bash", "arguments": json.dumps(args)}}]})  # fmt: skip
        msgs.append({"role": "tool", "tool_call_id": cid, "content": result})
    msgs += chat_steps(tag + "z", 2)
    msgs += [
        {"role": "assistant", "content": "Read every config."},
        {"role": "user", "content": "Now fix the deployment."},
    ]
    ctx.sessions[tag] = f"probe-{tag}"
    r = send(ctx, "chat", {"model": "gpt-4o", "messages": msgs}, session=ctx.sessions[tag])
    if ctx.verbose:
        log(f"  secrets session {tag}: {r.headers.get('x-factrail')}")
    return sent


def _files(root: Path) -> Iterator[Path]:
    if root.exists():
        yield from (p for p in root.rglob("*") if p.is_file())


def _read_all(paths: Iterable[Path]) -> bytes:
    out = bytearray()
    for p in paths:
        with contextlib.suppress(OSError):
            out += p.read_bytes() + b"\n"
    return bytes(out)


def _rewritten_texts(ctx: Context, sent: dict[str, str]) -> bytes:
    """What the gateway rewrote in the requests it forwarded: tool results not sent as they
    came."""
    originals = set(sent.values())
    out = bytearray()
    for rec in ctx.upstream.records():
        with contextlib.suppress(ValueError):
            body = json.loads(rec["raw"])
            for m in body.get("messages", []):
                text = m.get("content")
                if m.get("role") == "tool" and isinstance(text, str) and text not in originals:
                    out += text.encode() + b"\n"
    return bytes(out)


def class_secrets(ctx: Context) -> tuple[list[Result], list[str]]:
    slots = _make_slots()
    per_session = 60
    ctx.judge.reset()
    ctx.upstream.reset()
    sent: dict[str, str] = {}
    judge_bodies = bytearray()
    for i in range(0, len(slots), per_session):
        sent.update(_secret_session(ctx, slots[i : i + per_session]))
        judge_bodies += b"\n".join(r["raw"] for r in judge_calls(ctx)) + b"\n"
        ctx.judge.reset()
    time.sleep(1.0)  # what the turn taught its session is stored after the answer
    sinks = {
        "saved outputs": _read_all(_files(ctx.gw.outputs_dir)),
        "state store": _read_all(_files(ctx.gw.state_dir)),
        "judge payloads": bytes(judge_bodies),
        "decision log": _read_all(_files(ctx.gw.data_dir / "factrail" / "decisions")),
        "process log": ctx.gw.stderr_text().encode(),
    }
    notes = _rewritten_texts(ctx, sent)
    exercised_by = {
        "saved outputs": ("result", sinks["saved outputs"]),
        "state store": ("result", sinks["saved outputs"]),
        "judge payloads": ("argument", sinks["judge payloads"]),
        "decision log": ("argument", sinks["decision log"]),
        "process log": ("", b""),
    }
    results: list[Result] = []
    table: list[str] = []
    for shape, _, sev in SLOT_SHAPES:
        mine = [s for s in slots if s.shape == shape]
        cells, bad, example = [], [], ""
        for sink in SINKS:
            place, proof = exercised_by[sink]
            pool = [s for s in mine if not place or s.placement == place]
            if place:
                pool = [s for s in pool if s.marker.encode() in proof]
            hits = [(s, how) for s in pool if (how := survival(sinks[sink], s.value))]
            cells.append(f"{len(hits)}/{len(pool)}")
            if hits:
                bad.append(f"{sink} {len(hits)}/{len(pool)} ({hits[0][1]})")
                example = example or f"{hits[0][0].text!r} (in a tool {hits[0][0].placement})"
        noted = sum(1 for s in mine if s.placement == "result" and survival(notes, s.value))
        table.append(f"  {shape:<44} " + " ".join(f"{c:>6}" for c in cells) + f"   {noted}")
        detail = f"survives in {'; '.join(bad)}; e.g. slot {example}" if bad else ""
        results.append(Result("4 secrets", shape, sev, bool(bad), detail))
    exercised = {
        sink: sum(1 for s in slots if exercised_by[sink][0] == s.placement
                  and s.marker.encode() in exercised_by[sink][1])
        for sink in SINKS[:4]
    }  # fmt: skip
    header = (
        f"  {'slot shape (survived/exercised per sink)':<44} "
        + " ".join(f"{x[:6]:>6}" for x in ("output", "state", "judge", "decisn", "log"))
        + "   in rewritten results sent upstream (info)"
    )
    info = [f"  values placed: {len(slots)}; exercised per sink: {exercised}", header, *table]
    return results, info


# -- raw HTTP -----------------------------------------------------------------------------------


def raw_request(
    port: int,
    method: str,
    target: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
    body: bytes = b"",
    timeout: float = HTTP_TIMEOUT_S,
) -> tuple[int, bytes]:
    """One HTTP/1.1 request written byte for byte (no client normalises its target or headers):
    the status (0 when the connection closed without one) and the body."""
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"host: 127.0.0.1"]
    lines += [k + b": " + v for k, v in headers]
    lines += [b"content-length: " + str(len(body)).encode(), b"connection: close"]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    head, _, rest = data.partition(b"\r\n\r\n")
    match = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    if match is None:
        return 0, data
    if b"transfer-encoding: chunked" in head.lower():
        out = bytearray()
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2 :]
        rest = bytes(out)
    return int(match.group(1)), rest


# -- 3. harvest ---------------------------------------------------------------------------------


def _caps_and_ids(ctx: Context) -> dict[str, list[str]]:
    """Saved outputs on disk: capability → the tool ids saved under it."""
    caps: dict[str, list[str]] = {}
    for f in _files(ctx.gw.outputs_dir):
        if f.parent == ctx.gw.outputs_dir:
            continue
        caps.setdefault(f.parent.name, []).append(f.name.removesuffix(".txt"))
    return caps


def _holds_cap(text: str, caps: Iterable[str]) -> str | None:
    lower = text.lower()
    return next((c for c in caps if c.lower() in lower), None)


def class_harvest(ctx: Context) -> list[Result]:
    res: list[Result] = []
    caps = _caps_and_ids(ctx)
    key = ctx.gw.admin_key
    port = ctx.gw.port
    if not caps:
        return [
            Result(
                "3 harvest",
                "saved outputs exist to harvest",
                CORE,
                False,
                "no saved output on disk: the class could not run",
                invalid=True,
            )
        ]
    cap0, ids0 = next(iter(caps.items()))
    id0 = ids0[0]
    # sanity: the owner reads its output
    status, body = raw_request(port, "GET", f"/v1/factrail/outputs/{cap0}/{id0}".encode())
    res.append(Result("3 harvest", "sanity: an output read with its own capability", CORE,
                      False, f"status {status}", invalid=status != 200))  # fmt: skip
    known_secret = body[:40] if status == 200 else b""

    # admin routes without the key
    listing_status, listing = raw_request(
        port, "GET", b"/v1/factrail/sessions?limit=1000",
        [(b"authorization", b"Bearer " + key.encode())])  # fmt: skip
    keys: list[str] = []
    with contextlib.suppress(ValueError):
        keys = re.findall(r'"(?:session|key)"\s*:\s*"([^"]+)"', listing.decode())
    res.append(Result("3 harvest", "sanity: the listing answers the admin key", CORE, False,
                      f"status {listing_status}, {len(keys)} sessions",
                      invalid=listing_status != 200))  # fmt: skip
    skey = keys[0] if keys else "h-0"
    paths = [
        "/v1/factrail/sessions", "/v1/factrail/sessions?limit=1000",
        f"/v1/factrail/sessions/{skey}", "/v1/factrail/sessions/", "//v1/factrail/sessions",
        "/v1//factrail/sessions",
        "/v1/factrail//sessions", "/V1/FACTRAIL/SESSIONS", "/v1/Factrail/sessions",
        "/v1/factrail/%73essions", "/v1/factrail/sessions%2F", "/v1/factrail/sessions;x=1",
        "/v1/factrail/./sessions", f"/v1/factrail/sessions/{skey}/", "/v1/%66actrail/sessions",
        "/factrail/sessions", "/factrail/login", "/factrail/", f"/factrail/sessions/{skey}",
        "/factrail/static/../sessions", "/factrail//", "/docs", "/openapi.json",
        "/v1/factrail", "/v1/factrail/outputs/", "/v1/factrail/outputs",
        f"/v1/factrail/sessions/{urllib.parse.quote(skey, safe='')}%00",
    ]  # fmt: skip
    wrong = rand_value(len(key) or 43, string.ascii_letters + string.digits + "-_")
    auths: list[tuple[str, list[tuple[bytes, bytes]]]] = [
        ("no credential", []),
        ("a wrong bearer", [(b"authorization", b"Bearer " + wrong.encode())]),
        ("the key less its last char", [(b"authorization", b"Bearer " + key[:-1].encode())]),
        ("the key upper-cased", [(b"authorization", b"Bearer " + key.upper().encode())]),
        ("the key plus one char", [(b"authorization", b"Bearer " + key.encode() + b"x")]),
        ("the key in x-api-key only", [(b"x-api-key", key[:-1].encode())]),
        ("an empty bearer", [(b"authorization", b"Bearer ")]),
        ("Basic with an empty password", [(b"authorization", b"Basic " + base64.b64encode(
            b"admin:"))]),
    ]  # fmt: skip
    if key.upper() == key:
        auths = [a for a in auths if a[0] != "the key upper-cased"]
    for path in paths:
        for method in ("GET", "HEAD", "POST", "OPTIONS"):
            for label, headers in auths:
                if method != "GET" and label != "no credential":
                    continue
                status, body = raw_request(port, method, path.encode(), headers)
                served = 200 <= status < 300
                text = body.decode("utf-8", "replace")
                if path == "/factrail/login" and served:  # the sign-in form is public: no data
                    served = any(k in text for k in keys) or 'name="key"' not in text
                cap = _holds_cap(text, caps)
                res.append(Result(
                    "3 harvest", f"{method} {path} with {label}", CORE, served or bool(cap),
                    f"status {status}, body {body[:200]!r}"))  # fmt: skip
    # everything an admin may read names no capability
    reads: list[tuple[str, str]] = [
        ("GET /v1/factrail/sessions", listing.decode("utf-8", "replace"))
    ]
    for k in keys[:60]:
        _, body = raw_request(port, "GET", f"/v1/factrail/sessions/{k}".encode(),
                              [(b"authorization", b"Bearer " + key.encode())])  # fmt: skip
        reads.append((f"GET /v1/factrail/sessions/{k}", body.decode("utf-8", "replace")))
    for path in ["/factrail/", *(f"/factrail/sessions/{k}" for k in keys[:20])]:
        _, body = raw_request(port, "GET", path.encode(),
                              [(b"authorization", b"Bearer " + key.encode())])  # fmt: skip
        reads.append((f"GET {path}", body.decode("utf-8", "replace")))
    for path in ("/metrics", "/healthz", "/readyz"):
        _, body = raw_request(port, "GET", path.encode())
        reads.append((f"GET {path}", body.decode("utf-8", "replace")))
    env = {**ctx.gw.env}
    for args in (
        ["inspect", "--list", "--json", "--limit", "1000"],
        *(["inspect", k, "--json"] for k in keys[:5]),
        *(["inspect", "--header", h, "--json"] for h in list(ctx.sessions.values())[:5]),
    ):
        out = subprocess.run([FACTRAIL, *args], env=env, capture_output=True, timeout=60,
                             cwd=ctx.home)  # fmt: skip
        reads.append(
            ("factrail " + " ".join(args), (out.stdout + out.stderr).decode("utf-8", "replace"))
        )
    reads.append(("the gateway's log (stderr)", ctx.gw.stderr_text()))
    decisions = _read_all(_files(ctx.gw.data_dir / "factrail" / "decisions")).decode(
        "utf-8", "replace"
    )
    for where, text in reads:
        cap = _holds_cap(text, caps)
        res.append(Result("3 harvest", f"{where} names no capability", CORE, cap is not None,
                          f"capability {cap} found"))  # fmt: skip
    cap = _holds_cap(decisions, caps)
    res.append(Result("3 harvest", "the decision log names no capability", EDGE, cap is not None,
                      f"capability {cap} found"))  # fmt: skip
    # outputs route: guessed, derived and borrowed ids
    others = [c for c in caps if c != cap0]
    guesses: list[tuple[str, str]] = [
        ("tool id alone", f"/v1/factrail/outputs/{id0}"),
        ("session key as folder", f"/v1/factrail/outputs/{skey}/{id0}"),
        ("capability less a char", f"/v1/factrail/outputs/{cap0[:-1]}/{id0}"),
        ("capability upper-cased", f"/v1/factrail/outputs/{cap0.upper()}/{id0}"),
        ("capability with a char added", f"/v1/factrail/outputs/{cap0}0/{id0}"),
        ("wildcard folder", f"/v1/factrail/outputs/*/{id0}"),
        ("percent-encoded wildcard", f"/v1/factrail/outputs/%2A/{id0}"),
        ("dot-dot to the state folder", "/v1/factrail/outputs/../../state/admin.key"),
        ("encoded dot-dot", "/v1/factrail/outputs/%2e%2e/%2e%2e/state/admin.key"),
        ("encoded slashes", "/v1/factrail/outputs/..%2F..%2Fstate%2Fstate.db"),
        ("backslashes", "/v1/factrail/outputs/..\\..\\state\\admin.key"),
        ("absolute path", "/v1/factrail/outputs//etc/passwd"),
    ]
    for c in others[:6]:
        guesses.append(("another session's capability with this tool id",
                        f"/v1/factrail/outputs/{c}/{id0}"))  # fmt: skip
    for h in list(ctx.sessions.values())[:3]:
        import hashlib
        import hmac

        for name, derived in (
            ("sha256 of the session header", hashlib.sha256(h.encode()).hexdigest()),
            ("hmac with an empty key", hmac.new(b"", h.encode(), "sha256").hexdigest()),
            ("the session header", h),
        ):
            guesses.append((name, f"/v1/factrail/outputs/{derived[: len(cap0)]}/{id0}"))
    for label, path in guesses:
        for headers in ([], [(b"authorization", b"Bearer " + key.encode())]):
            status, body = raw_request(port, "GET", path.encode(), headers)
            got = status == 200 and bool(body)
            leaked = got and (known_secret in body if known_secret else True)
            res.append(
                Result(
                    "3 harvest",
                    f"outputs route: {label}{' (admin key)' if headers else ''}",
                    CORE,
                    got,
                    f"GET {path} -> {status} {body[:120]!r}{' (owner output)' if leaked else ''}",
                )
            )
    # what reaches the disk: nothing readable by another user
    for root in (ctx.gw.outputs_dir, ctx.gw.state_dir, ctx.gw.data_dir / "factrail"):
        if not root.exists():
            continue
        for p in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(p.lstat().st_mode)
            if mode & 0o077:
                res.append(
                    Result(
                        "3 harvest",
                        f"mode of {p.relative_to(ctx.home)}",
                        CORE,
                        True,
                        f"mode {oct(mode)}: readable by group or others",
                    )
                )
    res.append(Result("3 harvest", "no file under outputs/state/data open to others", CORE, False))
    return res


# -- 6. admin key -------------------------------------------------------------------------------


def _b64(data: bytes, url: bool = False, pad: bool = True) -> bytes:
    out = base64.urlsafe_b64encode(data) if url else base64.b64encode(data)
    return out if pad else out.rstrip(b"=")


def _pct_all(data: bytes) -> bytes:
    return "".join(f"%{b:02X}" for b in data).encode()


_HEXRUN = re.compile(rb"(?:[0-9a-fA-F]{2}[:\- ]?){8,}")
_B64RUN = re.compile(rb"[A-Za-z0-9+/_\-]{12,}={0,2}")


def _transforms(v: bytes) -> Iterator[tuple[str, bytes]]:
    if b"%" in v or b"+" in v:
        yield "percent", urllib.parse.unquote_to_bytes(v)
        yield "percent+", urllib.parse.unquote_to_bytes(v.replace(b"+", b" "))
    if b"\\" in v:
        text = v.decode("latin-1")
        yield (
            "escapes",
            re.sub(
                r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4}))",
                lambda m: chr(int(m.group(1) or m.group(2), 16)),
                text,
            ).encode("utf-8", "replace"),
        )
    if b"&" in v:
        yield "html", html.unescape(v.decode("utf-8", "replace")).encode("utf-8", "replace")
    for m in _HEXRUN.finditer(v):
        with contextlib.suppress(ValueError, binascii.Error):
            yield "hex", binascii.unhexlify(re.sub(rb"[:\- ]", b"", m.group())[: 2 * 4096])
    squeezed = re.sub(rb"\s+", b"", v)
    for src in {v, squeezed}:
        for m in _B64RUN.finditer(src):
            run = m.group().rstrip(b"=")
            for off in range(4):
                part = run[off:]
                part = part[: len(part) - len(part) % 4] if len(part) % 4 == 1 else part
                padded = part + b"=" * (-len(part) % 4)
                for alt in (padded, padded.replace(b"-", b"+").replace(b"_", b"/")):
                    with contextlib.suppress(ValueError, binascii.Error):
                        yield "base64", base64.b64decode(alt, validate=True)
    if b"\x00" in v:
        yield "utf16", v.replace(b"\x00", b"")
    if not v.isascii():
        text = unicodedata.normalize("NFKC", v.decode("utf-8", "replace"))
        yield "nfkc", "".join(c for c in text if unicodedata.category(c) != "Cf").encode()


def encoded_in(data: bytes, needle: str, depth: int = 3, budget: int = 600) -> str | None:
    """How `needle` is held in `data`, in any case, through up to `depth` layers of percent,
    escape, HTML, hex, base64 (any alignment), UTF-16 and NFKC decoding; None when it is not."""
    target = needle.lower().encode()
    queue: list[tuple[str, bytes]] = [("raw", data)]
    seen: set[bytes] = set()
    while queue and len(seen) < budget:
        path, v = queue.pop(0)
        if v in seen:
            continue
        seen.add(v)
        if target in v.lower():
            return path
        if path.count(">") >= depth:
            continue
        queue += [(f"{path}>{n}", out) for n, out in _transforms(v) if out and out != v]
    return None


@dataclass(frozen=True)
class KeyProbe:
    label: str
    severity: str
    headers: Callable[[str], list[tuple[bytes, bytes]]] = lambda k: []
    target: Callable[[str, str], bytes] = lambda k, p: p.encode()
    body: Callable[[str], bytes | None] = lambda k: None
    split: bool = False


def key_probes() -> list[KeyProbe]:
    def H(name: str, value: Callable[[bytes], bytes]) -> Callable[[str], list[tuple[bytes, bytes]]]:
        return lambda k: [(name.encode(), value(k.encode()))]

    def Q(query: Callable[[bytes], bytes]) -> Callable[[str, str], bytes]:
        return lambda k, p: p.encode() + b"?" + query(k.encode())

    def half(k: str) -> int:
        return len(k) // 2

    c = client_key().encode()
    return [
        KeyProbe("Authorization: Bearer KEY", CORE, H("Authorization", lambda k: b"Bearer " + k)),
        KeyProbe("authorization: bearer<TAB>KEY", CORE,
                 H("authorization", lambda k: b"bearer\t" + k)),
        KeyProbe("Bearer \"KEY\"", CORE, H("Authorization", lambda k: b'Bearer "' + k + b'"')),
        KeyProbe("Bearer KEY;", CORE, H("Authorization", lambda k: b"Bearer " + k + b";")),
        KeyProbe("bare KEY, no scheme", CORE, H("Authorization", lambda k: k)),
        KeyProbe("Token KEY", CORE, H("Authorization", lambda k: b"Token " + k)),
        KeyProbe("Basic admin:KEY", CORE,
                 H("Authorization", lambda k: b"Basic " + _b64(b"admin:" + k))),
        KeyProbe("Basic KEY: base64url unpadded", CORE,
                 H("Authorization", lambda k: b"Basic " + _b64(k + b":", url=True, pad=False))),
        KeyProbe("Bearer base64(KEY)", CORE, H("Authorization", lambda k: b"Bearer " + _b64(k))),
        KeyProbe("JWT-shaped bearer, KEY in its payload", CORE, H("Authorization", lambda k:
                 b"Bearer " + _b64(b'{"alg":"none"}', True, False) + b"."
                 + _b64(b'{"sub":"' + k + b'"}', True, False) + b".")),
        KeyProbe("x-api-key: KEY", CORE, H("x-api-key", lambda k: k)),
        KeyProbe("api-key: KEY (Azure)", CORE, H("api-key", lambda k: k)),
        KeyProbe("X-Factrail-Admin-Key: KEY", CORE, H("X-Factrail-Admin-Key", lambda k: k)),
        KeyProbe("Cookie: factrail_admin=KEY", CORE, H("Cookie", lambda k: b"factrail_admin=" + k)),
        KeyProbe("Cookie, every byte percent-encoded", CORE,
                 H("Cookie", lambda k: b"a=1; k=" + _pct_all(k))),
        KeyProbe("two Authorization headers, KEY second", CORE,
                 lambda k: [(b"authorization", b"Bearer " + c),
                            (b"authorization", b"Bearer " + k.encode())]),
        KeyProbe("header name is KEY", CORE, lambda k: [(b"x-" + k.encode(), b"1")]),
        KeyProbe("KEY upper-cased in X-Trace", CORE, H("X-Trace", lambda k: k.upper())),
        KeyProbe("hex(KEY)", CORE, H("X-Trace", lambda k: k.hex().encode())),
        KeyProbe("hex(KEY) upper-case with colons", EDGE,
                 H("X-Trace", lambda k: b":".join(b"%02X" % b for b in k))),
        KeyProbe("\\u escapes of KEY", CORE,
                 H("X-Trace", lambda k: b"".join(b"\\u%04x" % b for b in k))),
        KeyProbe("\\x escapes of KEY", CORE,
                 H("X-Trace", lambda k: b"".join(b"\\x%02x" % b for b in k))),
        KeyProbe("HTML entities of KEY", EDGE,
                 H("X-Trace", lambda k: b"".join(b"&#x%x;" % b for b in k))),
        KeyProbe("KEY percent-encoded twice", CORE,
                 H("X-Trace", lambda k: _pct_all(k).replace(b"%", b"%25"))),
        KeyProbe("base64(base64(KEY))", EDGE, H("X-Trace", lambda k: _b64(_b64(k)))),
        KeyProbe("base64(hex(KEY))", EDGE, H("X-Trace", lambda k: _b64(k.hex().encode()))),
        KeyProbe("hex(base64(KEY))", EDGE, H("X-Trace", lambda k: _b64(k).hex().encode())),
        KeyProbe("base64(percent(KEY))", EDGE, H("X-Trace", lambda k: _b64(_pct_all(k)))),
        KeyProbe("base64(KEY) broken by spaces", EDGE,
                 H("X-Trace", lambda k: b" ".join(re.findall(rb".{1,4}", _b64(k))))),
        KeyProbe("base64(UTF-16LE KEY)", EDGE, H("X-Trace", lambda k: _b64(k.decode().encode(
                 "utf-16-le")))),
        KeyProbe("KEY in a JSON header", CORE, H("X-Meta", lambda k: b'{"admin":"' + k + b'"}')),
        KeyProbe("Forwarded: by=\"KEY\"", CORE,
                 H("Forwarded", lambda k: b'for=127.0.0.1;by="' + k + b'"')),
        KeyProbe("full-width KEY (UTF-8)", EDGE,
                 H("X-Trace", lambda k: "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch
                                                for ch in k.decode()).encode())),
        KeyProbe("KEY with zero-width spaces (UTF-8)", EDGE,
                 H("X-Trace", lambda k: "\u200b".join(k.decode()).encode())),
        KeyProbe("KEY split across two headers", EDGE,
                 lambda k: [(b"authorization", b"Bearer " + k[: half(k)].encode()),
                            (b"x-continued", k[half(k):].encode())], split=True),
        KeyProbe("KEY split across two Authorization values", EDGE,
                 lambda k: [(b"authorization", b"Bearer " + k[: half(k)].encode()),
                            (b"authorization", b"Bearer " + k[half(k):].encode())], split=True),
        KeyProbe("?admin_key=KEY", CORE, target=Q(lambda k: b"admin_key=" + k)),
        KeyProbe("query, every byte percent-encoded", CORE,
                 target=Q(lambda k: b"t=" + _pct_all(k))),
        KeyProbe("query parameter named KEY", CORE, target=Q(lambda k: k)),
        KeyProbe("query base64url(KEY)", CORE, target=Q(lambda k: b"t=" + _b64(k, True, False))),
        KeyProbe("query split across two parameters", EDGE,
                 target=Q(lambda k: b"a=" + k[: len(k) // 2] + b"&b=" + k[len(k) // 2:]),
                 split=True),
        KeyProbe("query with ; separator", CORE, target=Q(lambda k: b"a=1;k=" + k)),
        KeyProbe("matrix parameter in the path", CORE,
                 target=lambda k, p: p.encode() + b";key=" + k.encode()),
        KeyProbe("percent-encoded ? in the path", CORE,
                 target=lambda k, p: p.encode() + b"%3Fkey%3D" + k.encode()),
        KeyProbe("KEY as a path segment", CORE, target=lambda k, p: b"/v1/models/" + k.encode()),
        KeyProbe("KEY after # in the target", EDGE,
                 target=lambda k, p: p.encode() + b"#" + k.encode()),
    ]  # fmt: skip


BODY_KEY_PROBES: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
    ("body field user: KEY", lambda k: {"model": "gpt-4o", "user": k,
                                        "messages": [{"role": "user", "content": "hi"}]}),
    ("body metadata holding KEY", lambda k: {"model": "gpt-4o", "metadata": {"admin": k},
                                             "messages": [{"role": "user", "content": "hi"}]}),
]  # fmt: skip
KEY_ROUTES = [
    ("chat", "POST", "/v1/chat/completions"),
    ("models", "GET", "/v1/models"),
    ("anthropic", "POST", "/v1/messages"),
    ("anthropic pass-through", "POST", "/v1/messages/count_tokens"),
]


def _record_items(rec: dict[str, Any]) -> list[tuple[str, bytes]]:
    items = [("target", rec["target"].encode("latin-1", "replace"))]
    for k, v in rec["headers"]:
        items.append((f"header name {k}", k.encode("latin-1", "replace")))
        items.append((f"header {k}", v.encode("latin-1", "replace")))
    return items


def class_admin_key(ctx: Context) -> tuple[list[Result], list[Result]]:
    key = ctx.gw.admin_key
    res: list[Result] = []
    small = json.dumps({"model": "gpt-4o", "max_tokens": 16,
                        "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
    # sanity: a plain request reaches the upstream
    ctx.upstream.reset()
    send(ctx, "chat", small)
    valid = len(ctx.upstream.records()) == 1
    for probe in key_probes():
        for route, method, path in KEY_ROUTES:
            if probe.label == "KEY as a path segment" and route != "models":
                continue
            ctx.upstream.reset()
            headers = [(b"content-type", b"application/json")]
            if route.startswith("anthropic"):
                headers += [(b"x-api-key", anthropic_key().encode()),
                            (b"anthropic-version", b"2023-06-01")]  # fmt: skip
            headers += probe.headers(key)
            target = probe.target(key, path)
            status, _ = raw_request(ctx.gw.port, method, target, headers,
                                    small if method == "POST" else b"")  # fmt: skip
            found = []
            halves = [False, False]
            for rec in ctx.upstream.records():
                for where, blob in _record_items(rec):
                    how = encoded_in(blob, key)
                    if how:
                        found.append(f"{where} ({how}): {blob[:90]!r}")
                    if probe.split:
                        for i, h in enumerate((key[: len(key) // 2], key[len(key) // 2 :])):
                            halves[i] = halves[i] or encoded_in(blob, h, depth=2) is not None
            if all(halves):
                found.append("both halves of the key reached the upstream")
            detail = f"{method} {target[:160]!r} -> {status}; " + (
                "; ".join(found) if found else "nothing forwarded holds it"
            )
            res.append(Result("6 admin key", f"[{route}] {probe.label}", probe.severity,
                              bool(found), detail, invalid=not valid))  # fmt: skip
    body_res: list[Result] = []
    for label, make in BODY_KEY_PROBES:
        ctx.upstream.reset()
        send(ctx, "chat", make(key))
        held = [encoded_in(r["raw"], key) for r in ctx.upstream.records()]
        body_res.append(Result("6b admin key in a body", label, EDGE, any(held),
                               f"forwarded body holds the key: {held}"))  # fmt: skip
    return res, body_res


# -- 5. settings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingsCase:
    label: str
    severity: str
    env: dict[str, str] = field(default_factory=dict)
    """Values may hold `{s}` (a random secret) and `{config}` (the config file's path)."""
    host: str | None = None
    config: str | bytes | None = None
    """File contents, or `<fifo>`, `<dir>`, `<missing>`."""
    serve: bool = False
    """A control: these settings must serve."""


def settings_cases(judge_url: str) -> list[SettingsCase]:
    S = SettingsCase
    C = "FACTRAIL_CONFIG"
    T = "FACTRAIL_TAINT_TOOLS"
    P = "FACTRAIL" + "_"  # the names no setting has are built here, not written out
    bind = "0.0.0.0"
    out = [
        S("control: valid settings serve", CORE, serve=True),
        S("control: a valid config file serves", CORE, {C: "{config}"},
          config='[factrail]\negress = "metadata"\n', serve=True),
        S("FACTRAIL_EGRESS with a trailing tab", CORE, {"FACTRAIL_EGRESS": "full\t"}),
        S("FACTRAIL_EGRESS full-width letters", CORE, {"FACTRAIL_EGRESS": "ｆｕｌｌ"}),
        S("FACTRAIL_EGRESS capitalised", CORE, {"FACTRAIL_EGRESS": "Metadata"}),
        S("FACTRAIL_JUDGE capitalised", CORE, {"FACTRAIL_JUDGE": "Tev",
                                               "FACTRAIL_JUDGE_URL": judge_url}),
        S("FACTRAIL_JUDGE_LOCAL=y", CORE, {"FACTRAIL_JUDGE_LOCAL": "y"}),
        S("FACTRAIL_JUDGE_LOCAL=t", CORE, {"FACTRAIL_JUDGE_LOCAL": "t"}),
        S("FACTRAIL_JUDGE_LOCAL=ture", CORE, {"FACTRAIL_JUDGE_LOCAL": "ture"}),
        S("FACTRAIL_JUDGE_LOCAL=1.0", CORE, {"FACTRAIL_JUDGE_LOCAL": "1.0"}),
        S("FACTRAIL_JUDGE_LOCAL=TRUE", EDGE, {"FACTRAIL_JUDGE_LOCAL": "TRUE"}),
        S("FACTRAIL_SAVE_OUTPUTS='False '", CORE, {"FACTRAIL_SAVE_OUTPUTS": "False "}),
        S("taint list with a full-width comma", CORE, {T: "mcp__crm__，mcp__hr__"}),
        S("taint list with an ideographic comma", CORE, {T: "mcp__crm__、mcp__hr__"}),
        S("taint list with a slash", CORE, {T: "mcp__crm__/mcp__hr__"}),
        S("taint list with a colon (PATH style)", CORE, {T: "mcp__crm__:mcp__hr__"}),
        S("taint list with a vertical tab", CORE, {T: "mcp__crm__\x0bmcp__hr__"}),
        S("taint list JSON with a number", CORE, {T: '["mcp__crm__", 5]'}),
        S("taint list JSON, one name holding ;", CORE, {T: '["mcp__crm__;mcp__hr__"]'}),
        S("taint skills with |", CORE, {"FACTRAIL_TAINT_SKILLS": "email-search|hr-search"}),
        S("FACTRAIL_TRIGGER_TOKENS=2_000", CORE, {"FACTRAIL_TRIGGER_TOKENS": "2_000"}),
        S("FACTRAIL_TRIGGER_TOKENS Arabic-Indic digits", CORE,
          {"FACTRAIL_TRIGGER_TOKENS": "٢٠٠٠"}),
        S("FACTRAIL_TRIGGER_TOKENS full-width digits", CORE,
          {"FACTRAIL_TRIGGER_TOKENS": "２０００"}),
        S("FACTRAIL_KEEP_THRESHOLD=nan", CORE, {"FACTRAIL_KEEP_THRESHOLD": "nan"}),
        S("FACTRAIL_CONTEXT_WINDOWS as a Python dict", CORE,
          {"FACTRAIL_CONTEXT_WINDOWS": "{'gpt-4o': 128000}"}),
        S("FACTRAIL_STATE_URL relative SQLite path", CORE, {"FACTRAIL_STATE_URL": "sqlite://x.db"}),
        S(f"{P}TAINT_TOOL (singular)", CORE, {f"{P}TAINT_TOOL": "mcp__crm__"}),
        S("factrail_taint_tools (lower case)", CORE, {"factrail_taint_tools": "mcp__crm__"}),
        S("'FACTRAIL_TAINT_TOOLS ' (space in the name)", CORE,
          {"FACTRAIL_TAINT_TOOLS ": "mcp__crm__"}),
        S("FACTRAIL_ＴAINT_TOOLS (a full-width T)", CORE, {"FACTRAIL_ＴAINT_TOOLS": "mcp__crm__"}),
        S("FACTRAIL-TAINT-TOOLS (hyphens)", EDGE, {"FACTRAIL-TAINT-TOOLS": "mcp__crm__"}),
        S("FACTRIAL_TAINT_TOOLS (prefix transposed)", EDGE,
          {"FACTRIAL_TAINT_TOOLS": "mcp__crm__"}),
        S("config file missing", CORE, {C: "{config}"}, config="<missing>"),
        S("config path is a folder", CORE, {C: "{config}"}, config="<dir>"),
        S("config path is a FIFO nobody writes", CORE, {C: "{config}"}, config="<fifo>"),
        S("config file with a byte-order mark", CORE, {C: "{config}"},
          config='\ufeff[factrail]\negress = "full"\n'),
        S("config file egress = 'Full'", CORE, {C: "{config}"},
          config='[factrail]\negress = "Full"\n'),
        S("config file [Factrail] table", CORE, {C: "{config}"},
          config='[Factrail]\negress = "full"\n'),
        S("config file taint_tools with ;", CORE, {C: "{config}"},
          config='[factrail]\ntaint_tools = "mcp__a__;mcp__b__"\n'),
        S("config file key misspelled", CORE, {C: "{config}"},
          config='[factrail]\ntaint_tool = ["mcp__a__"]\n'),
        S("config file not UTF-8", CORE, {C: "{config}"},
          config=b"[factrail]\negress = \"\xff\"\n"),
        S("config file holding an environment-only key", CORE, {C: "{config}"},
          config='[factrail]\npure_python = "1"\n'),
        S("FACTRAIL_CONFIG empty", CORE, {C: ""}),
        S("FACTRAIL_CONFIG path with a trailing space", CORE, {C: "{config} "},
          config='[factrail]\negress = "full"\n'),
        S("config file: judge as a table holding a key", CORE, {C: "{config}"},
          config='[factrail]\njudge = { url = "https://j.example/v1", api_key = "{s}" }\n'),
        S("config file: judge_api_key as a list", CORE, {C: "{config}"},
          config='[factrail]\njudge_api_key = ["{s}"]\n'),
        S("--host 0.0.0.0 without an admin key", CORE, host=bind),
        S("--host 0.0.0.0, 15-char admin key", CORE, {"FACTRAIL_ADMIN_KEY": "k" * 15}, host=bind),
        S("--host ::, 1-char admin key", CORE, {"FACTRAIL_ADMIN_KEY": "k"}, host="::"),
        S("--host 0.0.0.0, key of 8 letters and 8 combining marks", EDGE,
          {"FACTRAIL_ADMIN_KEY": "a\u0301" * 8}, host=bind),
        S("--host 0.0.0.0, 5-char admin key in the config file", CORE, {C: "{config}"},
          host=bind, config='[factrail]\nadmin_key = "short"\n'),
        S("--host 0.0.0.0, admin key of 16 spaces", CORE, {"FACTRAIL_ADMIN_KEY": " " * 16},
          host=bind),
        S(f"{P}OUTPUTS_SECERT (typo) holding a secret", CORE,
          {f"{P}OUTPUTS_SECERT": "{s}"}),
        S(f"{P}ADMIN_PW holding a secret", CORE, {f"{P}ADMIN_PW": "{s}"}),
        S(f"{P}JUDGE_BEARER holding a secret", CORE, {f"{P}JUDGE_BEARER": "{s}"}),
        S("FACTRAIL_JUDGE_URL ?api_key= with a trailing space", CORE,
          {"FACTRAIL_JUDGE_URL": "https://j.example/v1?api_key={s} "}),
        S("FACTRAIL_STATE_URL redis password with an @ inside", CORE,
          {"FACTRAIL_STATE_URL": "redis://default:ab@{s}@cache.internal:6379/0 "}),
        S("FACTRAIL_UPSTREAM_URL userinfo password, trailing tab", CORE,
          {"FACTRAIL_UPSTREAM_URL": "https://u:{s}@up.example/v1\t"}),
        S("FACTRAIL_JUDGE_URL with a quote after a token", CORE,
          {"FACTRAIL_JUDGE_URL": "https://j.example/v1?token={s}\""}),
        S("FACTRAIL_JUDGE_API_KEY with a trailing newline", CORE,
          {"FACTRAIL_JUDGE_API_KEY": "{s}\n"}),
        S("FACTRAIL_ADMIN_KEY with a leading space", CORE, {"FACTRAIL_ADMIN_KEY": " {s}"}),
        S("factrail_tev_api_key (lower-case name)", CORE, {"factrail_tev_api_key": "{s}"}),
    ]  # fmt: skip
    return out


def _run_settings_case(case: SettingsCase, base: dict[str, str], root: Path) -> Result:
    work = Path(tempfile.mkdtemp(prefix="case-", dir=root))
    secret = rand_value(24)
    config = work / "factrail.toml"
    if case.config == "<dir>":
        config.mkdir()
    elif case.config == "<fifo>":
        os.mkfifo(config)
    elif isinstance(case.config, bytes):
        config.write_bytes(case.config)
    elif isinstance(case.config, str) and case.config != "<missing>":
        config.write_text(case.config.replace("{s}", secret), encoding="utf-8")
    env = {
        **base,
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_CACHE_HOME": str(work / "cache"),
        "FACTRAIL_STATE_URL": f"sqlite:///{work / 'state' / 'state.db'}",
        "FACTRAIL_OUTPUTS_DIR": str(work / "outputs"),
    }
    for k, v in case.env.items():
        env[k] = v.replace("{s}", secret).replace("{config}", str(config))
    port = free_port()
    args = [FACTRAIL, "serve", "--port", str(port)]
    if case.host is not None:
        args += ["--host", case.host]
    err_path = work / "stderr"
    with err_path.open("wb") as err_file:
        proc = subprocess.Popen(args, env=env, cwd=work, stdout=subprocess.PIPE, stderr=err_file)
        served = hung = False
        deadline = time.monotonic() + SETTINGS_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            if STARTED in err_path.read_bytes():  # the settings were taken: it serves
                served = True
                break
            time.sleep(0.2)
        if proc.poll() is None:
            hung = not served
            stop(proc)
        out, _ = proc.communicate(timeout=10)
    err = err_path.read_bytes()
    text = err.decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    shown = (out + err).decode("utf-8", "replace")
    problems: list[str] = []
    if case.serve:
        if not served:
            problems.append(f"did not serve (exit {proc.returncode}): {text[:300]!r}")
    else:
        if served:
            problems.append("it serves")
        if hung:
            problems.append(f"neither served nor exited within {SETTINGS_WAIT_S:.0f} s")
        if not served and not hung and proc.returncode != 2:
            problems.append(f"exit status {proc.returncode}, not 2")
        if not served and not hung and len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        if (
            lines
            and not served
            and not any(
                ("FACTRAIL" in ln.upper() or str(config) in ln or "--host" in ln) for ln in lines
            )
        ):
            problems.append("no variable named")
    for needle in (secret, secret[:12], secret[12:]):
        if needle in shown:
            problems.append("a secret value is printed")
            break
    env_shown = {k: v for k, v in case.env.items()}
    detail = (
        f"env {json.dumps(env_shown, ensure_ascii=True)}"
        + (f", --host {case.host}" if case.host else "")
        + (f", config {case.config!r}" if case.config else "")
        + f" -> exit {proc.returncode}; {'; '.join(problems) or 'ok'};"
        f" stderr: {' | '.join(lines)[:300]!r}"
    )
    shutil.rmtree(work, ignore_errors=True)
    return Result("5 settings", case.label, case.severity, bool(problems), detail)


def class_settings(ctx: Context) -> list[Result]:
    base = {**clean_env(), "FACTRAIL_UPSTREAM_URL": ctx.upstream.base + "/v1"}
    root = ctx.home / "settings"
    root.mkdir()
    cases = settings_cases(ctx.judge.base + "/v1")
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda c: _run_settings_case(c, base, root), cases))


# -- 7. hook ------------------------------------------------------------------------------------


def hook_messages(tag: str, use: dict[str, Any] | None, steps: int = 7) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "text": first_message(tag)}]
    if use is not None:
        msgs.append({"role": "assistant", "text": "Checking.", "toolUses": [use]})
        msgs.append(
            {
                "role": "user",
                "text": "",
                "toolResults": [{"tool_use_id": use["tool_use_id"], "text": MAIL_RESULT}],
            }
        )
    for i in range(steps):
        tid = f"toolu_{tag}_{i}"
        msgs.append(
            {
                "role": "assistant",
                "text": f"Step {i}.",
                "toolUses": [
                    {"tool_use_id": tid, "tool": "Bash", "input": {"command": f"make -C pkg{i}"}}
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "text": "",
                "toolResults": [{"tool_use_id": tid, "text": filler(tag, i)}],
            }
        )
    msgs.append({"role": "assistant", "text": "Looked at every package."})
    return msgs  # fmt: skip


def compact_request(tag: str, use: dict[str, Any] | None, config: dict[str, Any]) -> bytes:
    return json.dumps({
        "protocol": 1, "config": config,
        "session": {"id": f"sess-{tag}", "cwd": "/repo", "model": "claude-sonnet-4-5",
                    "trigger": "manual", "agentId": None},
        "instructions": "", "messages": hook_messages(tag, use),
        "usage": {"tokens": 9000, "window": 200000}, "store": {"enabled": True, "taint": None},
        "now": int(time.time() * 1000),
    }).encode()  # fmt: skip


def _nest(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def hook_inputs() -> list[tuple[str, str, str, bytes]]:
    """(label, severity, event, stdin)."""
    big = 2**64 + 1
    generic: list[tuple[str, bytes]] = [
        ("empty stdin", b""),
        ("invalid UTF-8", b'{"protocol": 1, "x": "\xff\xfe"}'),
        ("a JSON array", b"[]"),
        ("a JSON string", b'"compact"'),
        ("a JSON number", b"1"),
        ("null", b"null"),
        ("true", b"true"),
        ("now past 2^64", b'{"protocol": 1, "now": %d}' % big),
        ("now 1e400", b'{"protocol": 1, "now": 1e400}'),
        ("now of 5,000 digits", b'{"protocol": 1, "now": ' + b"9" * 5000 + b"}"),
        ("NaN literal", b'{"protocol": 1, "now": NaN}'),
        ("100,000 nested arrays", b'{"protocol": 1, "config": ' + _nest(100_000).encode() + b"}"),
        ("a byte-order mark", b'\xef\xbb\xbf{"protocol": 1}'),
        ("protocol 1.0", b'{"protocol": 1.0}'),
        ("protocol true", b'{"protocol": true}'),
        ("duplicate protocol keys", b'{"protocol": 2, "protocol": 1}'),
        ("protocol past 2^64", b'{"protocol": %d}' % big),
    ]
    every_event = {"empty stdin", "invalid UTF-8", "a JSON array", "now past 2^64",
                   "100,000 nested arrays", "protocol past 2^64"}  # fmt: skip
    out = [
        (label, CORE, ev, data)
        for ev in ("compact", "turn", "taint", "status")
        for label, data in generic
        if ev == "compact" or label in every_event
    ]
    u64 = 2**64 - 1
    specific: list[tuple[str, str, dict[str, Any] | bytes]] = [
        ("compact", "messages 200 levels deep in text",
         {"protocol": 1, "messages": [{"role": "user", "text": json.loads(_nest(200))}]}),
        ("compact", "tool input a 64-bit number, session id a number",
         {"protocol": 1, "session": {"id": u64, "model": [1], "trigger": {"a": 1}},
          "messages": [{"role": "assistant", "toolUses": [
              {"tool_use_id": 5, "tool": None, "input": u64}]}]}),
        ("compact", "usage of 1e308 tokens and a window of 1e-308",
         {"protocol": 1, "messages": [], "usage": {"tokens": 1e308, "window": 1e-308}}),
        ("compact", "20,000 messages",
         {"protocol": 1, "messages": [{"role": "user", "text": "x"}] * 20000}),
        ("compact", "a taint list with ;", {"protocol": 1, "messages": [],
                                              "config": {"taintTools": "mcp__a__;mcp__b__"}}),
        ("turn", "usage and baseline at the edges",
         {"protocol": 1, "usage": {"tokens": 1e308, "percent": 1e308, "window": 1e-308},
          "baseline": {"tokens": u64, "at": -(2**63)}, "now": 2**53 + 1}),
        ("turn", "tools list of odd types",
         {"protocol": 1, "tools": [None, 1, "x", {"tool": [1], "skill": {"a": 1}}],
          "usage": {"tokens": "9e999"}}),
        ("taint", "tool an object, skill a list, a huge stored sample",
         {"protocol": 1, "tool": {"name": F_NAME}, "skill": [F_SKILL],
          "store": {"taint": {"tainted": "true", "count": 1e308, "sample": "x" * 1_000_000}}}),
        ("status", "args a 64-bit number, last deeply nested",
         {"protocol": 1, "args": u64, "store": {"last": json.loads(_nest(500))}}),
    ]  # fmt: skip
    for ev, label, req in specific:
        data = req if isinstance(req, bytes) else json.dumps(req).encode()
        out.append((label, CORE, ev, data))
    return out


def _hook_env(ctx: Context, work: Path, key: str, **extra: str) -> dict[str, str]:
    return {
        **clean_env(),
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_CACHE_HOME": str(work / "cache"),
        "FACTRAIL_STATE_URL": f"sqlite:///{work / 'state.db'}",
        "FACTRAIL_OUTPUTS_DIR": str(work / "outputs"),
        "FACTRAIL_JUDGE": "tev",
        "FACTRAIL_JUDGE_URL": ctx.judge.base + "/v1",
        "FACTRAIL_JUDGE_API_KEY": key,
        "FACTRAIL_JUDGE_LOCAL": "false",
        "FACTRAIL_TRIGGER_TOKENS": str(TRIGGER_TOKENS),
        "FACTRAIL_PRICE_PROFILE": "none",
        **extra,
    }


def _run_hook(event: str, data: bytes, env: dict[str, str], cwd: Path) -> tuple[list[str], str]:
    """Problems with one `factrail hook` run, and its first output line."""
    try:
        proc = subprocess.run([FACTRAIL, "hook", event], input=data, env=env, cwd=cwd,
                              capture_output=True, timeout=HOOK_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return [f"no answer within {HOOK_TIMEOUT_S:.0f} s"], ""
    problems = []
    out = proc.stdout
    if proc.returncode != 0:
        problems.append(f"exit status {proc.returncode}")
    if b"Traceback" in proc.stderr or b"Traceback" in out:
        problems.append("a traceback: " + proc.stderr.decode("utf-8", "replace")[-300:])
    lines = out.split(b"\n")
    if len(lines) != 2 or lines[1] != b"":
        problems.append(f"{len([x for x in lines if x])} output lines")
    try:
        obj = json.loads(lines[0])
        if not isinstance(obj, dict):
            problems.append("the answer is not a JSON object")
    except ValueError:
        problems.append(f"the answer is not JSON: {out[:200]!r}")
    return problems, lines[0].decode("utf-8", "replace")[:240]


HookCase = tuple[str, str, dict[str, Any], dict[str, Any], dict[str, str], bool]
"""(label, severity, the toolUse, the request's config, extra environment, fenced)."""


def class_hook(ctx: Context) -> list[Result]:
    root = ctx.home / "hook"
    root.mkdir()
    key = "-".join(("jk", rand_value(32)))

    def weird(case: tuple[str, str, str, bytes]) -> Result:
        label, sev, event, data = case
        work = Path(tempfile.mkdtemp(dir=root))
        problems, first = _run_hook(event, data, _hook_env(ctx, work, key), work)
        shown = data[:160] + (b"..." if len(data) > 160 else b"")
        return Result(
            "7 hook",
            f"hook {event}: {label}",
            sev,
            bool(problems),
            f"stdin {shown!r} -> {'; '.join(problems) or 'ok'}; answer {first!r}",
        )

    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(weird, hook_inputs()))
    third = ctx.third.base + "/v1"
    own = ctx.judge.base + "/v1"
    fenced = {"tool_use_id": "toolu_m", "tool": F_NAME, "input": {"query": "salary"}}
    clean = {"tool_use_id": "toolu_m", "tool": B_NAME, "input": {"query": "dates"}}
    local_env = {"FACTRAIL_JUDGE_LOCAL": "true"}
    cases: list[HookCase] = [
        ("control: clean, config.baseUrl at a third listener", CORE, clean,
         {"baseUrl": third, "backendLocal": True}, {}, False),
        ("fenced, config.baseUrl third listener, backendLocal true", CORE, fenced,
         {"baseUrl": third, "backendLocal": True}, {}, True),
        ("fenced, settings judge local, config.baseUrl third listener", CORE, fenced,
         {"baseUrl": third, "backendLocal": True}, local_env, True),
        ("fenced, config.baseUrl the settings' judge with a slash, backendLocal true", CORE,
         fenced, {"baseUrl": own + "/", "backendLocal": True}, {}, True),
        ("fenced, backend TEV, backendLocal 'true', apiKey given", CORE, fenced,
         {"backend": " TEV ", "baseUrl": third, "backendLocal": "true", "apiKey": "x"}, {}, True),
        ("fenced, backendLocal 1", CORE, fenced, {"baseUrl": third, "backendLocal": 1}, {}, True),
        ("clean, config.baseUrl upper-case scheme", CORE, clean,
         {"baseUrl": third.replace("http://", "HTTP://")}, {}, False),
        ("clean, config.baseUrl with a dot-dot segment", CORE, clean,
         {"baseUrl": third + "/../v1"}, {}, False),
        ("clean, config.baseUrl with userinfo", CORE, clean,
         {"baseUrl": third.replace("http://", "http://judge:pw@")}, {}, False),
        ("clean, settings judge local, config.baseUrl third listener", CORE, clean,
         {"baseUrl": third, "backendLocal": True}, local_env, False),
        ("clean, backend systemone at the third listener", CORE, clean,
         {"backend": "systemone", "baseUrl": third + "/systemone", "backendLocal": True}, {},
         False),
        ("fenced via use_mcp_tool input", CORE, {"tool_use_id": "toolu_m", "tool": "use_mcp_tool",
         "input": {"server_name": F_SERVER, "tool_name": F_TOOL}}, {}, {}, True),
        ("fenced via multi_tool_use.parallel", CORE, {"tool_use_id": "toolu_m",
         "tool": "multi_tool_use.parallel", "input": {"tool_uses": [
             {"recipient_name": f"functions.{F_NAME}", "parameters": {}}]}}, {}, {}, True),
        ("fenced, Turkish-locale lower-case name", CORE, {"tool_use_id": "toolu_m",
         "tool": "mcp__emaıl-gateway__search_threads", "input": {}}, {}, {}, True),
        ("fenced via Skill skill_name", EDGE, {"tool_use_id": "toolu_m", "tool": "Skill",
         "input": {"skill_name": F_SKILL}}, {}, {}, True),
        ("fenced via mcp_tool_use-like server_name beside the tool", EDGE,
         {"tool_use_id": "toolu_m", "tool": F_TOOL, "server_name": F_SERVER, "input": {}}, {},
         {}, True),
    ]  # fmt: skip
    ctx.third.reset()
    ctx.judge.reset()

    def run_case(case: HookCase) -> tuple[str, list[str], str]:
        _, _, use, config, extra, _ = case
        work = Path(tempfile.mkdtemp(dir=root))
        tag = new_tag()
        env = _hook_env(ctx, work, key, **extra)
        problems, first = _run_hook("compact", compact_request(tag, use, config), env, work)
        return tag, problems, first

    with ThreadPoolExecutor(PARALLEL) as pool:
        runs = list(pool.map(run_case, cases))
    t_all, j_all = ctx.third.records(), ctx.judge.records()
    tags = [tag.encode() for tag, _, _ in runs]
    orphans = [r for r in t_all if not any(t in r["raw"] for t in tags)]
    for (label, sev, use, config, extra, is_fenced), (tag, problems, first) in zip(
        cases, runs, strict=True
    ):
        t_recs = [r for r in t_all if tag.encode() in r["raw"]]
        j_recs = [r for r in j_all if tag.encode() in r["raw"]]
        for rec in [*t_recs, *orphans]:
            for where, blob in [*_record_items(rec), ("body", rec["raw"])]:
                how = encoded_in(blob, key, depth=2)
                if how:
                    problems.append(
                        f"the environment's judge key reached the third listener in its"
                        f" {where} ({how})"
                    )
        local = extra.get("FACTRAIL_JUDGE_LOCAL") == "true"
        if is_fenced and t_recs:
            problems.append(f"the third listener got {len(t_recs)} requests for a fenced session")
        if is_fenced and j_recs and not local:
            problems.append(f"the remote judge got {len(j_recs)} requests for a fenced session")
        invalid = label.startswith("control") and not t_recs
        detail = (
            f"toolUse {json.dumps(use, ensure_ascii=True)}, config {config}, env {extra}"
            f" -> third {len(t_recs)}, judge {len(j_recs)}; {'; '.join(problems) or 'ok'};"
            f" answer {first[:160]!r}"
        )
        results.append(Result("7 hook", label, sev, bool(problems), detail, invalid))
    return results


# -- the run ------------------------------------------------------------------------------------

CLASSES = {
    "1": "1 fence",
    "2": "2 taint identity",
    "3": "3 harvest",
    "4": "4 secrets",
    "5": "5 settings",
    "6": "6 admin key",
    "7": "7 hook",
}


def report(results: list[Result], info: list[str], elapsed: float, command: str) -> None:
    order = [*CLASSES.values(), "6b admin key in a body"]
    print(f"\nfactrail security probe ({command}), {elapsed:.0f} s\n")
    print(f"{'class':<26} {'probes':>6} {'failures':>8} {'core':>5} {'edge':>5} {'invalid':>7}")
    for cls in order:
        rs = [r for r in results if r.cls == cls]
        if not rs:
            continue
        bad = [r for r in rs if r.failed]
        core = sum(1 for r in bad if r.severity == CORE)
        inv = sum(1 for r in rs if r.invalid)
        print(f"{cls:<26} {len(rs):>6} {len(bad):>8} {core:>5} {len(bad) - core:>5} {inv:>7}")
    total = [r for r in results if r.failed and r.cls != "6b admin key in a body"]
    print(f"{'total (without 6b)':<26} {len(results):>6} {len(total):>8}")
    for cls in order:
        bad = [r for r in results if r.cls == cls and (r.failed or r.invalid)]
        if not bad:
            continue
        print(f"\n== {cls}: failures ==")
        for r in bad:
            flag = "INVALID " if r.invalid and not r.failed else ""
            print(f"- {flag}[{r.severity}] {r.label}\n    {r.detail}")
    if info:
        print("\n== 4 secrets: survival per slot shape ==")
        print("\n".join(info))


def run(args: argparse.Namespace) -> int:
    only = set((args.only or ",".join(CLASSES)).split(","))
    started = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix="factrail-probe-"))
    fakes = [Fake("upstream"), Fake("judge"), Fake("judge")]
    gw: Gateway | None = None
    results: list[Result] = []
    info: list[str] = []
    try:
        upstream, judge, third = (f.start() for f in fakes)
        gw = Gateway(home / "gw", upstream, judge, "-".join(("jk", rand_value(32)))).start()
        log(f"gateway on {gw.base}; admin key {'found' if gw.admin_key else 'NOT found'}")
        with httpx.Client(timeout=HTTP_TIMEOUT_S) as client:
            ctx = Context(gw, upstream, judge, third, home, args.verbose, client)
            steps: list[tuple[str, Callable[[], None]]] = [
                ("1", lambda: results.extend(class_fence(ctx))),
                ("2", lambda: results.extend(class_identity(ctx))),
                ("4", lambda: _secrets(ctx, results, info)),
                ("3", lambda: results.extend(class_harvest(ctx))),
                ("6", lambda: _admin(ctx, results)),
                ("5", lambda: results.extend(class_settings(ctx))),
                ("7", lambda: results.extend(class_hook(ctx))),
            ]
            for cls, step in steps:
                if cls in only:
                    t = time.monotonic()
                    step()
                    log(f"class {CLASSES[cls]} done in {time.monotonic() - t:.0f} s")
    finally:
        if gw is not None:
            gw.close()
        for f in fakes:
            f.close()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        else:
            log(f"kept {home}")
    command = " ".join(["python", "bench/security_probe.py", *sys.argv[1:]])
    report(results, info, time.monotonic() - started, command)
    failed = [r for r in results if r.failed and r.cls != "6b admin key in a body"]
    return 1 if failed else 0


def _secrets(ctx: Context, results: list[Result], info: list[str]) -> None:
    found, table = class_secrets(ctx)
    results.extend(found)
    info.extend(table)


def _admin(ctx: Context, results: list[Result]) -> None:
    found, body = class_admin_key(ctx)
    results.extend(found)
    results.extend(body)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--fake", choices=("upstream", "judge"), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--only", help="comma-separated classes to run (1-7)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    if args.fake:
        serve_fake(args.fake, args.port)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
