"""The terminal's input while `dagent` follows a prompt: lines read on the event loop (so a question can be
abandoned while it waits), and the answer line owned by the program while questions may be asked.

At a terminal, the terminal neither echoes nor edits while a prompt is followed with questions
(`owned_answer_line`): each key shows once a question takes it (`read_answer`), and `typed_answer` is what the
answer line shows, so a question printed again carries it and what is applied is always what the screen
shows. Keys typed with no question on screen show nowhere and are discarded. Piped answers are read a line at
a time, in order.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import sys
import termios
from collections.abc import Iterator
from typing import TextIO

ERASE_CHAR = ("\x7f", "\x08")  # Backspace, Ctrl-H
ERASE_LINE = "\x15"  # Ctrl-U
ERASE_WORD = "\x17"  # Ctrl-W
END_OF_INPUT = "\x04"  # Ctrl-D


def _erased(typed: str, key: str) -> int:
    """How many characters at the end of `typed` an editing key erases (0: not an editing key)."""
    if key in ERASE_CHAR:
        return min(1, len(typed))
    if key == ERASE_LINE:
        return len(typed)
    if key == ERASE_WORD:
        kept = typed.rstrip()
        return len(typed) - (kept.rindex(" ") + 1 if " " in kept else 0)
    return 0


@contextlib.contextmanager
def _keys_one_by_one(fd: int) -> Iterator[bool]:
    """The terminal hands over each key as it is typed and echoes nothing (no ICANON, no ECHO; Ctrl-C still
    interrupts), until the block ends. False: not a terminal, nothing changed."""
    try:
        saved = termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):
        yield False
        return
    mode = termios.tcgetattr(fd)
    mode[3] &= ~(termios.ECHO | termios.ICANON)
    mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
    termios.tcsetattr(fd, termios.TCSANOW, mode)
    try:
        yield True
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


class _Stdin:
    """Lines from stdin read on the event loop, so a question can be abandoned while it waits. One reader at a
    time: a second concurrent read would replace the first one's watch on the descriptor."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False
        self.discard_at_exit = False  # set once questions were asked: keys typed while `dagent` ends are theirs
        self.owned = False  # the terminal echoes nothing and hands over each key (`owned_answer_line`)
        self.typed = ""  # the answer on screen, while the program owns the answer line (a question at a terminal)

    async def line(self) -> str | None:
        """One line from stdin without blocking the event loop; None at the end of input."""
        while b"\n" not in self.buffer and not self.eof:
            data = await self._read()
            self.eof = not data
            self.buffer.extend(data)
        if not self.buffer:
            return None
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line.decode(errors="replace")

    def discard(self) -> None:
        """Forget what was typed but not asked for (a terminal only: piped answers are meant in order), so a
        stray keystroke never answers the next question, nor reaches the shell after `dagent` exits."""
        if not _stdin_is_terminal():
            return
        self.buffer.clear()
        self.typed = ""
        with contextlib.suppress(termios.error, OSError, ValueError):
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)

    async def answer(self, out: TextIO) -> str | None:
        """One answer to a question. At a terminal the program owns the answer line: the terminal neither
        echoes nor edits; each key is echoed here and kept in `typed`, so a question printed again shows what
        was typed (`LiveView.line`) and what is applied is always what the screen shows. Backspace, Ctrl-U
        and Ctrl-W edit; Enter answers; Ctrl-D on an empty line is the end of input (None). Elsewhere (piped
        answers): one line, as `line`."""
        if not self.owned:
            return await self.line()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        escape = ""  # an escape sequence being skipped (arrow keys and the like answer nothing)
        self.typed = ""
        try:
            while True:
                if not self.buffer:
                    data = await self._read()
                    if not data:
                        return None
                    self.buffer.extend(data)
                key = decoder.decode(bytes(self.buffer[:1]))
                del self.buffer[:1]
                if not key:
                    continue
                if escape:  # ESC x, or ESC [ … final / ESC O final: skipped whole
                    escape += key
                    if (len(escape) == 2 and key not in "[O") or (len(escape) > 2 and "@" <= key <= "~") \
                            or len(escape) > 16:
                        escape = ""
                    continue
                if key == "\x1b":
                    escape = key
                    continue
                if key in "\r\n":
                    out.write("\n")
                    out.flush()
                    return self.typed
                if key == END_OF_INPUT and not self.typed:
                    return None
                erase = _erased(self.typed, key)
                if erase:
                    self.typed = self.typed[:len(self.typed) - erase]
                    out.write("\b \b" * erase)
                elif key.isprintable():
                    self.typed += key
                    out.write(key)
                out.flush()
        finally:
            self.typed = ""

    @staticmethod
    async def _read() -> bytes:
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        ready: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        except (PermissionError, OSError):  # a regular file: always readable, cannot be watched
            return os.read(fd, 4096)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        return os.read(fd, 4096)


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin.isatty()
    except (ValueError, AttributeError):
        return False


_STDIN = _Stdin()
read_line = _STDIN.line
read_answer = _STDIN.answer
discard_typed_ahead = _STDIN.discard


@contextlib.contextmanager
def owned_answer_line(out: TextIO) -> Iterator[None]:
    """While a prompt is followed with questions at a terminal, the program owns the answer line: the terminal
    echoes nothing and edits nothing, so a key shows only once a question takes it (`_Stdin.answer`), and
    keys typed with no question on screen show nowhere and are discarded before the next one."""
    if not (_stdin_is_terminal() and out.isatty()):
        yield
        return
    with _keys_one_by_one(sys.stdin.fileno()) as owned:
        _STDIN.owned = owned
        try:
            yield
        finally:
            _STDIN.discard()
            _STDIN.owned = False


def typed_answer() -> str:
    """What is typed on the answer line now (empty when the terminal owns the line)."""
    return _STDIN.typed


def discard_at_exit() -> None:
    """The last thing `dagent` does after it asked questions on a terminal: keys typed while it printed the end
    (meant for a question that is gone) are dropped rather than run by the shell."""
    if _STDIN.discard_at_exit:
        _STDIN.discard()


def questions_were_asked() -> None:
    """Keys typed from now until `dagent` exits are meant for questions that are gone (`discard_at_exit`)."""
    _STDIN.discard_at_exit = True
