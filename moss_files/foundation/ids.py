"""Identifiers and the clock, both injectable so tests are deterministic.

Core layer. Two id forms, neither a counter, so ids made on different branches or clones never
collide:
- ULID (26 Crockford base32 characters, time-ordered) for capsules, messages and most artifacts;
- `<PREFIX>-<YYYYMMDD>-<8 base32 chars>` (40 random bits) for kinds whose seed uses a readable,
  dated id (insights, sessions, board items).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_ULID_DIGITS = CROCKFORD.upper()
ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
PREFIXED_RE = re.compile(r"^(?P<prefix>[A-Z][A-Z0-9]{0,9})-(?P<date>\d{8})-(?P<random>[0-9a-hjkmnp-tv-z]{8})$")

Clock = Callable[[], datetime]
RandomBytes = Callable[[int], bytes]


def system_clock() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class IdSource(NamedTuple):
    """Makes ids from a clock and a source of random bytes (both replaceable in tests).

    A named tuple, not a frozen dataclass: every command's Context module imports this one,
    and building a dataclass costs about a millisecond of each process's start-up."""

    clock: Clock = system_clock
    random_bytes: RandomBytes = os.urandom

    def ulid(self) -> str:
        """A new ULID string: 48 bits of milliseconds, then 80 random bits."""
        milliseconds = int(self.clock().timestamp() * 1000)
        return encode_ulid(milliseconds.to_bytes(6, "big") + self.random_bytes(10))

    def prefixed(self, prefix: str) -> str:
        """A new `<PREFIX>-<YYYYMMDD>-<random>` id, for example `INS-20260121-7f3k9q2m`."""
        if not re.fullmatch(r"[A-Z][A-Z0-9]{0,9}", prefix):
            raise ValueError(f"id prefix must be 1-10 capitals/digits, got {prefix!r}")
        day = self.clock().astimezone(UTC).strftime("%Y%m%d")
        number = int.from_bytes(self.random_bytes(5), "big")
        chars = "".join(CROCKFORD[(number >> shift) & 31] for shift in range(35, -1, -5))
        return f"{prefix}-{day}-{chars}"


def encode_ulid(raw: bytes) -> str:
    """The ULID text of 16 bytes: 26 Crockford base32 capitals, most significant first (the
    first one carries the top 3 bits). Encoded here rather than by python-ulid, whose import
    reads its package metadata (~15 ms of a command, and of the first claim under the board
    lock in a server)."""
    number = int.from_bytes(raw, "big")
    return "".join(_ULID_DIGITS[(number >> shift) & 31] for shift in range(125, -1, -5))


def is_ulid(text: str) -> bool:
    """True for a well-formed ULID string."""
    return bool(ULID_RE.match(text))


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with a `Z`, second precision: the form every artifact stores."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_date(moment: datetime) -> str:
    """`YYYY-MM-DD` in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def fixed_clock(moment: datetime) -> Clock:
    """A clock that always returns `moment` (for tests and reproducible benches)."""
    return lambda: moment


def seeded_random(seed: int) -> RandomBytes:
    """Deterministic bytes from a seed (for tests and reproducible benches only)."""
    import random

    generator = random.Random(seed)
    return generator.randbytes


_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_safe_id(text: str, *, max_length: int) -> bool:
    """Whether `text` can be an item's id and so its file name: letters, digits, '.', '_' and
    '-', starting with a letter or digit, no '..', at most `max_length` characters."""
    return 0 < len(text) <= max_length and _SAFE_ID.fullmatch(text) is not None and ".." not in text
