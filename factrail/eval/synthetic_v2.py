"""A harder synthetic corpus (`--synthetic-v2`): facts where the fact-line patterns do not look.

The reference corpus buries every fact in a line the fact patterns score highly (ERROR, HTTP,
FAILED, sha256, versions), so a rails engine tuned on it can pass by regex alone. Here the same
splitmix64 generator plants one unique, digit-bearing token per step in places those patterns
miss or mis-cut:

- `api`: an id inside a JSON API response printed on one line of more than 2,000 chars;
- `trace`: a module path in one frame of a Python stack trace;
- `table`: an account id in the middle cell of a psql table;
- `prose`: a 12-hex hash in the middle of an ordinary sentence;
- `windows`: a package folder in a Windows path of a PowerShell listing;
- `i18n`: an order id glued to Japanese or German text;
- `config`: a build id in a source file the agent reads and later changes with an `Edit` call
  whose `old_string` quotes the line (a reproducible read whose content still matters);
- plus plain reads and searches with nothing to find.

The agent later uses a learnt token, one call in three: it quotes it in its text, passes it as a
`description` argument, or (for tokens read from a file) edits the line holding it. Draw order is
fixed and no float is used, so a seed gives the same corpus everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from factrail.core.model import Message, ToolResult, ToolUse
from factrail.eval.synthetic import (
    FILES,
    SERVICES,
    WORDS,
    SplitMix64,
    Step,
    bury,
    calls_for,
    code,
    filler,
)

KINDS = ("api", "trace", "table", "prose", "windows", "i18n", "config", "read", "search")
_MASK = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Planted:
    """A token planted in an output, the line holding it, and the file it sits in (if any)."""

    token: str
    line: str
    file: str | None = None


def _number(rng: SplitMix64, digits: int) -> str:
    """A decimal string of exactly `digits` digits (first digit non-zero)."""
    low = 10 ** (digits - 1)
    return str(low + rng.below(9 * low))


def _api(rng: SplitMix64, svc: str) -> tuple[Step, list[Planted]]:
    items = 30 + rng.below(30)
    target = rng.below(items)
    parts: list[str] = []
    token = ""
    for i in range(items):
        oid = "ord_" + rng.hex(6) + _number(rng, 6)
        owner = "usr_" + rng.hex(8)
        if i == target:
            token = oid
        parts.append(
            f'{{"id":"{oid}","status":"{rng.pick(("pending", "paid", "shipped"))}",'
            f'"owner":"{owner}","note":"{rng.pick(WORDS)} {rng.pick(WORDS)}"}}'
        )
    line = f'{{"data":{{"items":[{",".join(parts)}]}},"page":1}}'
    command = f"curl -s https://{svc}.internal/v1/orders?limit={items}"
    return Step("Bash", {"command": command}, line), [Planted(token, line)]


def _trace(rng: SplitMix64, svc: str) -> tuple[Step, list[Planted]]:
    frames = 8 + rng.below(12)
    target = rng.below(frames)
    lines = ["Traceback (most recent call last):"]
    token = ""
    for i in range(frames):
        module = f"{rng.pick(WORDS)}_{_number(rng, 5)}"
        path = f"/srv/{svc}/{rng.pick(WORDS)}/{module}.py"
        if i == target:
            token = module
        lines.append(f'  File "{path}", line {1 + rng.below(900)}, in {rng.pick(WORDS)}')
        lines.append(f"    {rng.pick(WORDS)} = {rng.pick(WORDS)}({rng.pick(WORDS)})")
    lines.append(f"KeyError: '{rng.pick(WORDS)}'")
    body = filler(rng, 40 + rng.below(60))
    output = "\n".join(body) + "\n" + "\n".join(lines)
    line = next(x for x in lines if token in x)
    step = Step("Bash", {"command": f"python -m {svc}.worker"}, output, is_error=True)
    return step, [Planted(token, line)]


def _table(rng: SplitMix64) -> tuple[Step, list[Planted]]:
    rows = 40 + rng.below(80)
    target = rng.below(rows)
    lines = [" id | account | owner | balance", "----+---------+-------+--------"]
    token = ""
    for i in range(rows):
        account = "AC" + _number(rng, 8)
        if i == target:
            token = account
        balance = f"{rng.below(100000)}.{rng.below(100):02d}"
        lines.append(f" {i + 1} | {account} | {rng.pick(WORDS)} | {balance}")
    line = next(x for x in lines if token in x)
    command = "psql -c 'select id, account, owner, balance from ledger'"
    return Step("Bash", {"command": command}, "\n".join(lines)), [Planted(token, line)]


def _prose(rng: SplitMix64) -> tuple[Step, list[Planted]]:
    token = rng.hex(11) + str(rng.below(10))
    words = [rng.pick(WORDS) for _ in range(10)]
    line = " ".join([*words[:5], "from blob", token, "before the", *words[5:]])
    body = filler(rng, 80 + rng.below(120))
    output = bury(rng, body, [line])
    return Step("Bash", {"command": "cat NOTES.txt"}, output), [Planted(token, line)]


def _windows(rng: SplitMix64) -> tuple[Step, list[Planted]]:
    entries = 30 + rng.below(50)
    target = rng.below(entries)
    lines: list[str] = []
    token = ""
    for i in range(entries):
        folder = f"pkg-{_number(rng, 4)}"
        if i == target:
            token = folder
        lines.append(f"C:\\build\\out\\{folder}\\{rng.pick(WORDS)}_{rng.pick(WORDS)}.msi")
    line = lines[target]
    command = "Get-ChildItem -Recurse C:\\build\\out -Filter *.msi"
    return Step("PowerShell", {"command": command}, "\n".join(lines)), [Planted(token, line)]


def _i18n(rng: SplitMix64) -> tuple[Step, list[Planted]]:
    token = "ID-" + _number(rng, 7)
    if rng.below(2) == 0:
        line = f"注文{token}の処理に失敗しました（再試行 {rng.below(9)} 回目）"
    else:
        line = f"Überprüfung für Auftrag {token} fehlgeschlagen – Grund: Zeitüberschreitung"
    body = [f"Schritt {i}: {' '.join(rng.pick(WORDS) for _ in range(6))} ✓" for i in range(60)]
    output = bury(rng, body, [line])
    return Step("Bash", {"command": "cat /srv/queue/status.txt"}, output), [Planted(token, line)]


def _config(rng: SplitMix64) -> tuple[Step, list[Planted]]:
    file = "/repo/" + rng.pick(FILES)
    token = "bld-" + _number(rng, 8)
    line = f'const BUILD_ID: &str = "{token}";'
    body = code(rng, 80 + rng.below(120)).split("\n")
    output = bury(rng, body, [line])
    return Step("Read", {"file_path": file}, output), [Planted(token, line, file)]


def step_v2(rng: SplitMix64) -> tuple[Step, list[Planted]]:
    """One tool call of a random kind (service drawn first, then the kind)."""
    svc = rng.pick(SERVICES)
    kind = KINDS[rng.below(len(KINDS))]
    if kind == "api":
        return _api(rng, svc)
    if kind == "trace":
        return _trace(rng, svc)
    if kind == "table":
        return _table(rng)
    if kind == "prose":
        return _prose(rng)
    if kind == "windows":
        return _windows(rng)
    if kind == "i18n":
        return _i18n(rng)
    if kind == "config":
        return _config(rng)
    if kind == "read":
        file = rng.pick(FILES)
        return Step("Read", {"file_path": f"/repo/{file}"}, code(rng, 100 + rng.below(150))), []
    hits = [f"/repo/{rng.pick(FILES)}:{1 + 7 * i}: {filler(rng, 1)[0]}" for i in range(40)]
    return Step("Grep", {"pattern": rng.pick(WORDS)}, "\n".join(hits)), []


def _pair(tool_use_id: str, text: str, step: Step) -> list[Message]:
    use = ToolUse(tool_use_id, step.tool, step.input, step.output, step.is_error)
    result = ToolResult(tool_use_id, step.output, step.is_error)
    return [Message("assistant", text, tool_uses=[use]), Message("user", tool_results=[result])]


def session(seed: int, calls: int) -> list[Message]:
    """A v2 session of `calls` steps, plus the `Edit` calls its follow-ups make."""
    rng = SplitMix64(seed)
    svc = rng.pick(SERVICES)
    messages = [
        Message("user", f"The {svc} service is failing in staging. Find out why and fix it.")
    ]
    learnt: list[Planted] = []
    for n in range(calls):
        step, planted = step_v2(rng)
        text = ""
        if learnt and rng.below(3) == 0:
            p = learnt[rng.below(len(learnt))]
            if p.file is not None:
                new_line = p.line.replace(p.token, p.token + "-hotfix")
                edit = Step(
                    "Edit",
                    {"file_path": p.file, "old_string": p.line, "new_string": new_line},
                    f"The file {p.file} has been updated successfully.",
                )
                messages += _pair(f"toolu_{seed:04x}_{n:03d}_edit", "", edit)
            elif rng.below(2) == 0:
                text = f"Following up on {p.token} from earlier."
            else:
                step.input["description"] = f"check {p.token}"
        messages += _pair(f"toolu_{seed:04x}_{n:03d}", text, step)
        learnt.extend(planted)
        if n % 9 == 8:
            messages.append(Message("user", f"Keep going; prioritise the {svc} failures."))
    messages.append(Message("assistant", "Summary of the investigation so far."))
    return messages


def corpus(seed: int, n: int) -> list[tuple[str, list[Message]]]:
    """`n` v2 sessions named `synthetic-v2-<s>`, seeded `seed, seed + 1, …`."""
    out: list[tuple[str, list[Message]]] = []
    for k in range(n):
        s = (seed + k) & _MASK
        out.append((f"synthetic-v2-{s}", session(s, calls_for(s))))
    return out
