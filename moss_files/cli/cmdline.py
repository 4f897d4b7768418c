"""A command line read as click reads it, for the commands that run without typer
(`moss_files.cli.quick`, `cstack.quick`).

Entry layer, standard library only. `scan` splits the words after a command into its
arguments and its options' values, the way click's parser does for the options it is told of;
each quick parser then checks and converts what it got, and gives up (None: typer decides)
wherever click might answer otherwise. The quick parsers' tests compare them with click's own
parsing on generated command lines.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

HELP = ("--help", "-h")


def scan(
    args: Sequence[str], values: Mapping[str, str], flags: Mapping[str, str], *, unknown_is_word: bool = False
) -> tuple[list[str], list[tuple[str, str | bool]]] | None:
    """(the arguments, the options given as (parameter, value) in order: True for a flag) of
    `args`, with `values` naming the options that take a value and `flags` those that take
    none, each by its spelling (`--limit`, `-l`). A word that does not start with `-` is an
    argument, and so is `-` and every word after `--`; a long option takes its value after
    `=` or as the next word, a short one as the next word.

    None where click would refuse the line or answer otherwise: help, an option that needs a
    value and has none, a flag given one (`--json=1`), an unknown option (which is an argument
    instead with `unknown_is_word`, as for a command that ignores unknown options)."""
    words: list[str] = []
    given: list[tuple[str, str | bool]] = []
    only_words = False
    position = 0
    while position < len(args):
        token = args[position]
        position += 1
        if only_words or token == "-" or not token.startswith("-"):
            words.append(token)
            continue
        if token == "--":
            only_words = True
            continue
        name, equals, value = token.partition("=") if token.startswith("--") else (token, "", "")
        if name in flags:
            if equals:
                return None  # click: "Option '--json' does not take a value."
            given.append((flags[name], True))
            continue
        if name not in values:
            if unknown_is_word and name not in HELP:
                words.append(token)
                continue
            return None
        if not equals:
            if position >= len(args):
                return None  # click: "Option '--limit' requires an argument."
            value = args[position]
            position += 1
        given.append((values[name], value))
    return words, given


def assign(params: dict[str, Any], given: Sequence[tuple[str, str | bool]], *, integers: Collection[str] = (), repeated: Collection[str] = ()) -> bool:
    """Put the options `scan` found into `params`, as click converts them: a flag as True, an
    integer option's value with int() (as click's INT), a repeated option's values as a list,
    any other value as it is. False, with `params` half filled, where the quick parsers leave
    the answer to click: an empty value, one that starts with `-` (click would take it as the
    value), an integer that does not convert."""
    for key, value in given:
        if value is True:
            params[key] = True
        elif not value or not isinstance(value, str) or value.startswith("-"):
            return False
        elif key in integers:
            try:
                params[key] = int(value)
            except ValueError:
                return False
        elif key in repeated:
            params[key] = [*(params[key] or ()), value]
        else:
            params[key] = value
    return True
