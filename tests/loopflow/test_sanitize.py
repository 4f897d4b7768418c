"""The sanitizer (pure): secrets and machine paths out, safe text untouched, counts by kind."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moss_files.loopflow.sanitize import personal_warnings, sanitize


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("key sk-ant-api03-abcdefghijklmnopqrstu end", "key [API_KEY] end", "api_key"),
        ("openai sk-proj-abcdefghijklmnopqrstuvwx", "openai [API_KEY]", "api_key"),
        ("stripe sk_live_abcdefgh1234", "stripe [API_KEY]", "api_key"),
        ("gh ghp_abcdefghijklmnopqrstu1234", "gh [API_KEY]", "api_key"),
        ("slack xoxb-1234567890-abcdef", "slack [API_KEY]", "api_key"),
        ("aws AKIAIOSFODNN7EXAMPLE.", "aws [API_KEY].", "api_key"),
        ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [REDACTED]", "bearer_token"),
        ("password=hunter22 next", "password=[REDACTED] next", "secret"),
        ('"api_key": "abcd1234efgh"', '"api_key": "[REDACTED]"', "secret"),
        ("DB_PASSWORD: 'p4ss word'", "DB_PASSWORD: '[REDACTED]'", "secret"),
        ("https://u:p4ss@example.com/x", "https://example.com/x", "url_credentials"),
        ("see https://h.example/a?b=1&access_token=XYZ123&c=2", "see [URL_WITH_AUTH]", "url_with_auth"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0ab.c2lnbmF0dXJl", "jwt [JWT]", "jwt"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n-----END OPENSSH PRIVATE KEY-----", "[PRIVATE_KEY]", "private_key"),
        ("log at /tmp/run-7/out.log.", "log at [PATH].", "path"),
        ("C:\\Users\\bob\\x.txt here", "[PATH] here", "path"),
    ],
)
def test_each_rule(text: str, expected: str, kind: str) -> None:
    result = sanitize(text)
    assert result.text == expected and result.found[kind] >= 1


def test_paths_under_the_workspace_and_home_are_rewritten_not_dropped() -> None:
    text = "edit /work/proj/src/a.py, /work/proj, /work/project-b/x and /home/ana/.config/x; /usr/lib/python3 stays"
    result = sanitize(text, root="/work/proj", home="/home/ana")
    assert result.text == "edit src/a.py, ., /work/project-b/x and ~/.config/x; /usr/lib/python3 stays"
    assert result.found["path"] == 3


def test_personal_data_only_when_asked() -> None:
    text = "mail ana@example.com at 192.168.1.20 about 123e4567-e89b-12d3-a456-426614174000"
    assert sanitize(text).text == text
    assert sanitize(text, personal=True).text == "mail [EMAIL] at [IP] about [UUID]"
    phone, names = personal_warnings("Call Ana Lopez on 555-123-4567")
    assert phone == "text may contain phone numbers" and "Ana Lopez" in names


@pytest.mark.parametrize(
    "safe",
    [
        "Token limits apply; the tokenizer counts words.",
        "Use a password manager, never a shared password.",
        "The key insight: locks need deadlines.",
        "Run `python -m pytest` from src/ (see docs/dev.md).",
        "Version 1.2.3.4 of the schema, port 8080.",
    ],
)
def test_safe_text_is_untouched(safe: str) -> None:
    result = sanitize(safe)
    assert result.text == safe and not result.changed


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_sanitizing_twice_changes_nothing_more(text: str) -> None:
    once = sanitize(text, root="/w/p", home="/home/a", personal=True)
    assert sanitize(once.text, root="/w/p", home="/home/a", personal=True).text == once.text
