"""The one Host / Origin / content-type rule every HTTP surface applies (pure function)."""

from __future__ import annotations

import pytest

from moss_files.foundation import httpguard
from moss_files.foundation.httpguard import FailureThrottle, bearer_matches, check_request, credentials, is_json, is_loopback, retry_after, split_host


def code(bind: str, host: str | None, origin: str | None = None, method: str = "GET", content_type: str | None = None) -> str | None:
    refusal = check_request(bind, host=host, origin=origin, method=method, content_type=content_type)
    return None if refusal is None else refusal.code


@pytest.mark.parametrize("host", ["127.0.0.1:7471", "localhost:7471", "[::1]:7471", "localhost", "127.0.0.2:80", "LOCALHOST:1"])
def test_loopback_servers_answer_this_machine(host: str) -> None:
    assert code("127.0.0.1", host) is None


@pytest.mark.parametrize("host", [None, "", "evil.example", "evil.example:7471", "10.0.0.7:7471", "[::1", "localhost:99999", "127.0.0.1:x"])
def test_loopback_servers_refuse_every_other_host(host: str | None) -> None:
    assert code("127.0.0.1", host) == "HOST_NOT_ALLOWED"
    assert code("::1", host) == "HOST_NOT_ALLOWED"


def test_servers_off_loopback_rely_on_their_token_for_the_host() -> None:
    assert code("0.0.0.0", "sleeve-3.internal:7471") is None
    assert code("10.0.0.7", "10.0.0.7:7471") is None


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (None, None),
        ("http://127.0.0.1:7471", None),
        ("http://localhost:3000", None),
        ("https://[::1]:8443", None),
        ("http://evil.example", "ORIGIN_NOT_ALLOWED"),
        ("http://127.0.0.1.evil.example", "ORIGIN_NOT_ALLOWED"),
        ("null", "ORIGIN_NOT_ALLOWED"),
        ("file://", "ORIGIN_NOT_ALLOWED"),
    ],
)
def test_origins(origin: str | None, expected: str | None) -> None:
    assert code("127.0.0.1", "127.0.0.1:7471", origin) == expected


def test_same_origin_is_allowed_off_loopback_and_other_origins_are_not() -> None:
    assert code("0.0.0.0", "sleeve-3.internal:7471", "http://sleeve-3.internal:7471") is None
    assert code("0.0.0.0", "sleeve-3.internal:7471", "http://localhost:7471") == "ORIGIN_NOT_ALLOWED"


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json", None),
        ("Application/JSON; charset=utf-8", None),
        (None, "UNSUPPORTED_MEDIA_TYPE"),
        ("text/plain", "UNSUPPORTED_MEDIA_TYPE"),
        ("application/jsonp", "UNSUPPORTED_MEDIA_TYPE"),
    ],
)
def test_posts_must_declare_json(content_type: str | None, expected: str | None) -> None:
    assert code("127.0.0.1", "localhost", method="POST", content_type=content_type) == expected
    assert code("127.0.0.1", "localhost", method="GET", content_type=content_type) is None
    assert is_json(content_type) is (expected is None)


def test_statuses_and_helpers() -> None:
    statuses = {
        check_request("127.0.0.1", host=h, origin=o, method=m, content_type=c).status  # type: ignore[union-attr]
        for h, o, m, c in (("evil", None, "GET", None), ("localhost", "http://evil", "GET", None), ("localhost", None, "POST", "text/plain"))
    }
    assert statuses == {421, 403, 415}
    assert split_host("[::1]:80") == ("::1", 80) and split_host("Example.ORG") == ("example.org", None)
    assert is_loopback("::1") and is_loopback("[::1]") and not is_loopback("0.0.0.0")


def test_loopback_is_read_in_every_spelling_the_resolver_reads() -> None:
    """One parser of addresses (foundation.hosts) for the guard and the agent's gate."""
    for host in ("127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "::ffff:7f00:1", "127.0.0.1."):
        assert is_loopback(host), host
    for host in ("0", "0.0.0.0", "::", "10.0.0.7", "127.0.0.1.5", "localhost.evil.example"):
        assert not is_loopback(host), host  # the unspecified address binds every interface
    assert code("127.0.0.1", "127.1:7471") is None and code("127.0.0.1", "2130706434:80") is None


@pytest.mark.parametrize("header", ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "BeArEr   s3cret ", " Bearer s3cret"])
def test_the_bearer_scheme_is_read_in_any_case(header: str) -> None:
    """RFC 9110, section 11.1: an authentication scheme is case-insensitive."""
    assert credentials(header, "Bearer") == "s3cret"
    assert bearer_matches(header, "s3cret")


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic s3cret", "Bearers3cret", "Bearer s3cre", "Bearer s3cret2", "Token s3cret"])
def test_anything_but_the_bearer_token_does_not_match(header: str | None) -> None:
    assert not bearer_matches(header, "s3cret")


def test_credentials_of_another_scheme() -> None:
    assert credentials("needlecast-hmac-sha256 abc", "Needlecast-HMAC-SHA256") == "abc"
    assert credentials("Bearer abc", "Needlecast-HMAC-SHA256") is None


def test_wrong_tokens_make_a_client_wait_longer_and_longer_but_never_for_ever() -> None:
    throttle = FailureThrottle()
    now = 1000.0
    waits = []
    for _ in range(12):
        assert throttle.wait("10.0.0.1", now) == 0.0  # each try comes once the wait is over
        throttle.failed("10.0.0.1", now)
        waits.append(throttle.wait("10.0.0.1", now))
        now += waits[-1]
    assert waits == [0, 0, 1, 2, 4, 8, 16, 30, 30, 30, 30, 30]  # bounded: one guess per 30 s at worst
    assert throttle.wait("10.0.0.2", now) == 0.0  # another address is not slowed down
    throttle.failed("10.0.0.1", now)
    assert throttle.wait("10.0.0.1", now + 10) == 20.0
    assert throttle.wait("10.0.0.1", now + httpguard.FORGET_SECONDS) == 0.0  # a long quiet forgets
    throttle.failed("10.0.0.1", now + httpguard.FORGET_SECONDS)
    assert throttle.wait("10.0.0.1", now + httpguard.FORGET_SECONDS) == 0.0  # counted from one again


def test_the_right_token_clears_the_count_and_the_table_is_bounded() -> None:
    throttle = FailureThrottle()
    for _ in range(5):
        throttle.failed("a", 0.0)
    throttle.succeeded("a")
    assert throttle.wait("a", 0.0) == 0.0
    for number in range(httpguard.MAX_CLIENTS + 10):
        for _ in range(3):
            throttle.failed(f"c{number}", 0.0)
    assert throttle.wait("c0", 0.0) == 0.0 and throttle.wait(f"c{httpguard.MAX_CLIENTS + 9}", 0.0) == 1.0  # the oldest went first
    assert [retry_after(s) for s in (0.2, 1.0, 1.01, 29.5)] == ["1", "1", "2", "30"]
