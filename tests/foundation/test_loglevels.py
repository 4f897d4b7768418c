"""LOG_LEVEL as the daemons read it (debug, info, warn, error, fatal), and the port scan a daemon
makes from its default port, with real sockets."""

from __future__ import annotations

import socket

import pytest

from moss_files.foundation import loglevels
from moss_files.foundation.errors import Conflict, InvalidRequest
from moss_files.foundation.httpserver import listen_from


def test_levels_are_moes_and_a_bad_one_is_refused() -> None:
    assert [loglevels.parse_level(text) for text in ("", None, "DEBUG", " warn ", "warning", "Error", "fatal")] == [
        "info",
        "info",
        "debug",
        "warn",
        "warn",
        "error",
        "fatal",
    ]
    with pytest.raises(InvalidRequest) as caught:
        loglevels.level_from_env({"LOG_LEVEL": "loud"})
    assert caught.value.details == {"variable": "LOG_LEVEL", "value": "loud", "levels": ["debug", "info", "warn", "error", "fatal"]}


def test_a_level_log_drops_the_lines_below_its_level_and_a_plain_log_is_at_info() -> None:
    printed: list[str] = []
    log = loglevels.LevelLog(printed.append, "warn")
    log("an info line")  # a plain call is info, as every daemon's log calls are
    for level in loglevels.LEVELS:
        loglevels.say(log, level, level)
    assert printed == ["warn", "error", "fatal"] and not loglevels.shows(log, "info")
    plain: list[str] = []
    for level in loglevels.LEVELS:
        loglevels.say(plain.append, level, level)
    assert plain == ["info", "warn", "error", "fatal"] and not loglevels.shows(plain.append, "debug")


def test_listening_from_a_busy_port_takes_the_next_free_one() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(Conflict):
            listen_from("127.0.0.1", port, scan=1, port_hint="hint")  # an explicit port is that port
        try:
            sock = listen_from("127.0.0.1", port, scan=50, port_hint="hint")
        except Conflict:
            pytest.skip(f"the 49 ports after {port} are all taken on this machine")  # a shared machine, not this code
        with sock:
            taken = sock.getsockname()[1]
            assert port < taken < port + 50
            with pytest.raises(Conflict) as caught:
                listen_from("127.0.0.1", taken, scan=1, port_hint="pick another")
            assert caught.value.hint == "pick another"
