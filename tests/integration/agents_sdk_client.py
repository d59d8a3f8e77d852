"""A real OpenAI Agents SDK agent with the hosted `shell` tool run locally, as its users run it.

    python -m tests.integration.agents_sdk_client BASE_URL MODEL MAX_TURNS PROMPT

The agent (`agents.Agent` with a `ShellTool` whose executor runs each command in the current
folder) talks to `BASE_URL` (an OpenAI-compatible `/v1`) through the Responses API, with tracing
off (nothing leaves the machine). The executor answers each command with its own chunk of
stdout, stderr and exit code, which the SDK sends back as a `shell_call_output`. The final
output is printed; a failure exits non-zero with the error on stderr.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from agents import (
    Agent,
    OpenAIResponsesModel,
    Runner,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

COMMAND_TIMEOUT_S = 30


def run_commands(request: ShellCommandRequest) -> ShellResult:
    """Run each command of the call in a shell, in the current folder."""
    outputs = []
    for command in request.data.action.commands:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        outcome = ShellCallOutcome(type="exit", exit_code=done.returncode)
        outputs.append(ShellCommandOutput(done.stdout, done.stderr, outcome, command=command))
    return ShellResult(output=outputs)


async def main(base_url: str, model: str, max_turns: int, prompt: str) -> str:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "scripted"))
    agent = Agent(
        name="Investigator",
        instructions="Answer from the files of this project; use the shell to read them.",
        model=OpenAIResponsesModel(model, client),
        tools=[ShellTool(executor=run_commands)],
    )
    result = await Runner.run(agent, prompt, max_turns=max_turns)
    return str(result.final_output)


if __name__ == "__main__":
    url, name, turns, task = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    print(asyncio.run(main(url, name, turns, task)))
