"""Saving outputs beside the rails: a child process stages a compaction's outputs (redacted and
written under temp names) while the parent applies the rails on another core; the parent then
commits the ones the reduced request names and removes the rest (`OutputStore.stage_all` /
`commit`: a rename each, race-free against any other compaction of the session).

Why a process: redaction is regex work that holds the GIL, so a thread would only take turns
with the rails. The child is `python -m factrail.stores.saver`, started once; it never imports
the parent's main module (as multiprocessing's spawn would) and talks over its stdin and stdout
in length-prefixed pickle frames, which a writer and a reader thread move, so a compaction only
pickles its outputs and goes on. While the child is starting, dead or slow, `stage` or `commit`
answers None and the compaction saves in its own thread as before: the child only ever gains
time, it can never lose an output.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from factrail.stores.outputs import OutputStore, SavedOutput, Staged

log = logging.getLogger("factrail.saver")

MIN_STAGE_CHARS = 64 * 1024
"""Below this many chars of candidate outputs, saving in-line costs less than the round trip."""
RETRY_S = 60.0
"""How long to wait before starting a child again after one could not start."""
COMMIT_TIMEOUT_S = 30.0
"""How long a compaction waits for its staging before saving in-line."""
_HEADER = struct.Struct(">Q")

Saved = dict[str, SavedOutput | OSError]


class SaverGone(RuntimeError):
    """The child ended before it answered."""


def _send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    """The next frame, or EOFError once the other side is gone."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


StagedBatch = dict[str, Staged | OSError]


@dataclass(frozen=True)
class Staging:
    """One staging sent to the child, and its answer: what it staged, by id."""

    session: str
    answer: Future[StagedBatch]


@dataclass
class _Child:
    """One child process, its frame queue and the answers it owes."""

    proc: subprocess.Popen[bytes]
    frames: queue.SimpleQueue[object | None] = field(default_factory=queue.SimpleQueue)
    pending: dict[int, Future[Any]] = field(default_factory=dict)
    ready: threading.Event = field(default_factory=threading.Event)
    gone: bool = False


class OutputSaver:
    """A child process that stages outputs for one `OutputStore` (same root, same secrets)."""

    def __init__(self, store: OutputStore, *, min_chars: int = MIN_STAGE_CHARS) -> None:
        self.store = store
        self.min_chars = min_chars
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._ids = itertools.count()
        self._closed = False
        self._retry_at = 0.0
        """After a child that could not start, when to try again (monotonic seconds)."""

    def start(self) -> None:
        """Start the child (it is `ready` once it has answered its set-up)."""
        with self._lock:
            if self._closed or self._child is not None:
                return
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "factrail.stores.saver"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    close_fds=True,
                )
            except (OSError, ValueError):
                log.warning("the output saver process could not start", exc_info=True)
                self._retry_at = time.monotonic() + RETRY_S
                return
            child = self._child = _Child(proc)
        # The secrets go down the pipe, never on a command line.
        child.frames.put((str(self.store.root), self.store.known_secrets))
        for target, name in ((self._write, "writer"), (self._read, "reader")):
            threading.Thread(
                target=target, args=(child,), name=f"factrail-saver-{name}", daemon=True
            ).start()

    @property
    def ready(self) -> bool:
        """Whether the child is up and has answered."""
        child = self._child
        return child is not None and child.ready.is_set() and not child.gone

    def stage(self, session: str, outputs: Sequence[tuple[str, str]]) -> Staging | None:
        """Send `outputs` to the child to stage; None when saving in-line is the better way
        (too little to save, child not ready)."""
        if not outputs or sum(len(text) for _, text in outputs) < self.min_chars:
            return None
        if not self.ready:
            if self._child is None and time.monotonic() >= self._retry_at:
                self.start()  # it died: a new one for the compactions to come
            return None
        child = self._child
        if child is None:
            return None
        answer: Future[StagedBatch] = Future()
        key = next(self._ids)
        with self._lock:
            if child.gone:
                return None
            child.pending[key] = answer
        child.frames.put((key, session, list(outputs)))
        return Staging(session, answer)

    def commit(
        self, staging: Staging, needed: Iterable[str], timeout: float = COMMIT_TIMEOUT_S
    ) -> Saved | None:
        """Put the staged outputs of `needed` in place and remove the others (`OutputStore.
        commit`): what was saved, by id; None when the child failed or is too slow (the caller
        then saves in-line; a staging that ends later has its files removed)."""
        try:
            staged = staging.answer.result(timeout=timeout)
        except FutureTimeout:
            log.warning("the output saver is too slow; saving in-line")
            staging.answer.add_done_callback(functools.partial(self._discard, staging.session))
            return None
        except Exception:
            log.warning("the output saver failed; saving in-line", exc_info=True)
            return None
        return self.store.commit(staging.session, staged, set(needed))

    def _discard(self, session: str, answer: Future[StagedBatch]) -> None:
        """Remove what a staging nobody will commit wrote (a commit of none of it)."""
        if not answer.cancelled() and answer.exception() is None:
            self.store.commit(session, answer.result(), frozenset())

    def close(self) -> None:
        """Stop the child: its input closes, it finishes what it was doing and exits."""
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        if child is None:
            return
        child.frames.put(None)
        try:
            child.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()

    def _write(self, child: _Child) -> None:
        """The writer thread: frames down the child's stdin until None or a broken pipe."""
        stdin = child.proc.stdin
        assert stdin is not None
        with contextlib.suppress(OSError, ValueError):
            while (frame := child.frames.get()) is not None:
                _send(stdin, frame)
        with contextlib.suppress(OSError, ValueError):
            stdin.close()

    def _read(self, child: _Child) -> None:
        """The reader thread: the child's answers to their futures until its output ends (or
        can no longer be read: the child then counts as gone, and its input is closed)."""
        stdout = child.proc.stdout
        assert stdout is not None
        with contextlib.suppress(Exception):
            while True:
                key, got = _receive(stdout)
                if key is None:
                    child.ready.set()
                    continue
                with self._lock:
                    answer = child.pending.pop(key, None)
                if answer is None:
                    continue
                if isinstance(got, BaseException):
                    answer.set_exception(got)
                else:
                    answer.set_result(got)
        with self._lock:
            child.gone = True
            if self._child is child:
                self._child = None
            owed = list(child.pending.values())
            child.pending.clear()
        child.frames.put(None)  # ends the writer
        for answer in owed:
            answer.set_exception(SaverGone("the output saver process ended"))
        with contextlib.suppress(Exception):
            child.proc.wait(timeout=5)
        if not self._closed:
            log.warning("the output saver process ended; saving in-line until it is back")


def main() -> None:
    """The child: set up from the first frame, then answer each request in order."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames goes to the parent
    try:
        root, known = _receive(stdin)
    except EOFError:
        return
    store = OutputStore(Path(root), known)
    _send(stdout, (None, None))
    while True:
        try:
            key, session, outputs = _receive(stdin)
        except EOFError:
            return
        try:
            got: object = store.stage_all(session, outputs)
        except Exception as exc:  # answered, never fatal: the parent saves in-line
            got = RuntimeError(f"output saver: {exc!r}")
        _send(stdout, (key, got))


if __name__ == "__main__":
    main()
