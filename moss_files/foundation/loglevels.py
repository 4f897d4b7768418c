"""Log levels of the daemons (`moss serve --http`, `needlecast sidecar`, `moss index watch`):
LOG_LEVEL names the least severe line they print (debug, info, warn, error, fatal), as Moe's
daemon reads it. Core layer: the entry points read the variable and wrap their line printer.

A daemon's log is any callable taking a line (the CLIs pass their stderr printer, tests a list's
append): a plain call is an info line, and `say(log, level, line)` gives a line its level. A
`LevelLog` drops the lines below its level; another callable is at the default level (info), so
it gets every line it got before and no debug line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from moss_files.foundation.errors import InvalidRequest

LEVEL_ENV = "LOG_LEVEL"
LEVELS = ("debug", "info", "warn", "error", "fatal")
DEFAULT_LEVEL = "info"
_SPELLINGS = {"warning": "warn", "critical": "fatal"}


def parse_level(text: str | None) -> str:
    """The level `text` names (any case; `warning` is `warn`); info when it is empty.

    Raises InvalidRequest for another word: a daemon refuses to start rather than guess."""
    word = (text or "").strip().lower()
    if not word:
        return DEFAULT_LEVEL
    word = _SPELLINGS.get(word, word)
    if word not in LEVELS:
        raise InvalidRequest(
            f"{LEVEL_ENV}={text!r} is not a log level: use {', '.join(LEVELS)}",
            details={"variable": LEVEL_ENV, "value": text, "levels": list(LEVELS)},
        )
    return word


def level_from_env(environ: Mapping[str, str]) -> str:
    """The level LOG_LEVEL names in `environ`. Raises InvalidRequest as `parse_level` does."""
    return parse_level(environ.get(LEVEL_ENV))


class LevelLog:
    """A line printer that drops the lines below `level`. Called with a line alone, it takes an
    info line, as every daemon's log does."""

    def __init__(self, write: Callable[[str], None], level: str = DEFAULT_LEVEL) -> None:
        self.write = write
        self.level = parse_level(level)
        self.rank = LEVELS.index(self.level)

    def __call__(self, line: str) -> None:
        self.at("info", line)

    def at(self, level: str, line: str) -> None:
        if LEVELS.index(level) >= self.rank:
            self.write(line)

    def shows(self, level: str) -> bool:
        """Whether a line of `level` would be printed (to skip building costly debug lines)."""
        return LEVELS.index(level) >= self.rank


def say(log: Callable[[str], None], level: str, line: str) -> None:
    """Give `line` to `log` at `level`: a LevelLog filters it by its level, any other callable
    by the default level."""
    if isinstance(log, LevelLog):
        log.at(level, line)
    elif shows(log, level):
        log(line)


def shows(log: Callable[[str], None], level: str) -> bool:
    """Whether `log` would print a line of `level`."""
    if isinstance(log, LevelLog):
        return log.shows(level)
    return LEVELS.index(level) >= LEVELS.index(DEFAULT_LEVEL)
