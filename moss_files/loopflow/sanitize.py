"""Sanitization: what leaves the workspace (an insight bundle, a pain point's context) without
the secrets and machine paths it may hold. Core layer: pure functions over text.

Two rule sets, as LoopFlow uses them:

- `SHARING` (bundles): secrets (private key blocks, credentials in URLs, URLs with token
  parameters, well-known API key shapes, bearer tokens, JWTs, `password=...`-style values)
  and absolute paths (inside the workspace made relative to it, inside the home folder made
  `~/...`, and any other personal or temporary location replaced by `[PATH]`).
- `FEEDBACK` (pain points): the same, plus e-mail addresses, IP addresses and UUIDs, with
  warnings for what may still be personal (phone numbers, names), as LoopFlow's pain-point
  capture does.

Each replacement is counted by kind, so a result can say what was removed without
repeating it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class Sanitized:
    """A sanitized text and how many replacements of each kind were made."""

    text: str
    found: Counter[str] = field(default_factory=Counter)

    @property
    def changed(self) -> bool:
        return bool(self.found)


Rule = tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]]


def _fixed(replacement: str) -> Callable[[re.Match[str]], str]:
    return lambda _match: replacement


_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)
_URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@", re.IGNORECASE)
_URL_TOKEN = re.compile(
    r"\bhttps?://[^\s\"'<>]*?[?&](?:access_token|token|key|api_key|apikey|secret|password|auth|signature|sig)=[^\s&\"'<>]+[^\s\"'<>]*", re.IGNORECASE
)
_API_KEY = re.compile(
    r"(?<![\w-])(?:"
    r"sk-ant-[A-Za-z0-9_-]{16,}|sk-(?:proj-)?[A-Za-z0-9_-]{20,}|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|npm_[A-Za-z0-9]{36}"
    r")(?![\w-])"
)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_ASSIGNED_SECRET = re.compile(
    r"""(?P<key>\b[\w.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?)\b["']?)"""
    r"""(?P<sep>\s*[:=]\s*)(?!["']?\[[A-Z_]+\])(?:"(?P<dq>[^"\n]{4,})"|'(?P<sq>[^'\n]{4,})'|(?P<bare>[^\s"',;]{4,}))""",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
_IP = re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
# Locations that name a person or a machine: home folders, temporary and system-specific ones.
_PERSONAL_PATH = re.compile(
    r"(?<![\w.~-])(?:/(?:Users|home|root|var|tmp|private|etc|opt|mnt|srv|Volumes)(?:/[^\s\"'`<>()\[\]{},;]+)+|/root\b"
    r"|[A-Za-z]:\\(?:[^\s\"'`<>|]+))"
)
_PHONE = re.compile(r"(?<!\d)(?:\+\d{1,3}[ .-]?)?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}(?!\d)")
_NAME = re.compile(r"(?=\b([A-Z][a-z]+ [A-Z][a-z]+)\b)")  # overlapping: "Call Ana Lopez" holds "Ana Lopez"
_TECH_PAIRS = frozenset({"React Native", "Visual Studio", "Google Cloud", "Open Source", "Claude Code", "Next Steps", "Key Locations"})


def _secret_value(match: re.Match[str]) -> str:
    quote = '"' if match.group("dq") is not None else "'" if match.group("sq") is not None else ""
    return f"{match.group('key')}{match.group('sep')}{quote}{REDACTED}{quote}"


def _keep_trailing_punctuation(found: str, replacement: str) -> str:
    # A sentence's full stop after a path is not part of the path.
    kept = found.rstrip(".,:;!?")
    return replacement + found[len(kept) :]


SECRET_RULES: tuple[Rule, ...] = (
    ("private_key", _PRIVATE_KEY, _fixed("[PRIVATE_KEY]")),
    ("url_credentials", _URL_CREDENTIALS, lambda m: m.group(1)),
    ("url_with_auth", _URL_TOKEN, _fixed("[URL_WITH_AUTH]")),
    ("api_key", _API_KEY, _fixed("[API_KEY]")),
    ("bearer_token", _BEARER, lambda m: f"{m.group(1)} {REDACTED}"),
    ("jwt", _JWT, _fixed("[JWT]")),
    ("secret", _ASSIGNED_SECRET, _secret_value),
)
PERSONAL_RULES: tuple[Rule, ...] = (
    ("email", _EMAIL, _fixed("[EMAIL]")),
    ("ip", _IP, _fixed("[IP]")),
    ("uuid", _UUID, _fixed("[UUID]")),
)


def _apply(text: str, rules: Sequence[Rule], found: Counter[str]) -> str:
    for kind, pattern, replace in rules:

        def counted(match: re.Match[str], kind: str = kind, replace: Callable[[re.Match[str]], str] = replace) -> str:
            found[kind] += 1
            return replace(match)

        text = pattern.sub(counted, text)
    return text


def _paths(text: str, roots: Sequence[tuple[str, str]], found: Counter[str]) -> str:
    """Absolute paths: under one of `roots` ((prefix, replacement) pairs, longest first)
    rewritten, any other personal location replaced by [PATH]."""
    for prefix, replacement in roots:
        if not prefix or prefix == "/":
            continue
        pattern = re.compile(r"(?<![\w.~-])" + re.escape(prefix.rstrip("/\\")) + r"(?=[/\\]|\b|$)(?P<rest>[/\\][^\s\"'`<>()\[\]{},;]*)?")

        def relative(match: re.Match[str], replacement: str = replacement) -> str:
            found["path"] += 1
            raw = match.group("rest") or ""
            rest = raw.rstrip(".,:;!?").lstrip("/\\")
            tail = raw[len(raw.rstrip(".,:;!?")) :]
            if replacement == ".":
                return (rest or ".") + tail
            return (f"{replacement}/{rest}" if rest else replacement) + tail

        text = pattern.sub(relative, text)

    def personal(match: re.Match[str]) -> str:
        found["path"] += 1
        return _keep_trailing_punctuation(match.group(0), "[PATH]")

    return _PERSONAL_PATH.sub(personal, text)


def sanitize(text: str, *, root: str | None = None, home: str | None = None, personal: bool = False) -> Sanitized:
    """`text` without secrets and machine paths (with `personal`, also without e-mail
    addresses, IP addresses and UUIDs). Paths under `root` (the workspace) become relative to
    it, paths under `home` become `~/...`."""
    found: Counter[str] = Counter()
    out = _apply(text, SECRET_RULES, found)
    roots = sorted(((prefix, repl) for prefix, repl in ((root, "."), (home, "~")) if prefix), key=lambda pair: len(pair[0]), reverse=True)
    out = _paths(out, roots, found)
    if personal:
        out = _apply(out, PERSONAL_RULES, found)
    return Sanitized(out, found)


def personal_warnings(text: str) -> list[str]:
    """What may still be personal in (sanitized) text: phone numbers, names. For a person to
    review; nothing is removed."""
    warnings: list[str] = []
    if "@" in text and "[EMAIL]" not in text:
        warnings.append("text may contain e-mail addresses")
    if _PHONE.search(text):
        warnings.append("text may contain phone numbers")
    names = [pair for pair in dict.fromkeys(_NAME.findall(text)) if pair not in _TECH_PAIRS]
    if names:
        warnings.append("text may contain names: " + ", ".join(names[:3]))
    return warnings
