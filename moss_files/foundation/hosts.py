"""Hosts and URLs, read one way: the host a URL connects to, IP addresses in every spelling the
system resolver accepts, and the URLs that two parsers would read differently.

Core layer: pure functions over texts (standard library only: `ipaddress`, and `urllib.parse`,
whose `urlsplit` is the parser Python's HTTP clients use). The capability gate
(`moss_files.agent.policy`) and the HTTP guard (`httpguard`) both read hosts here, so a host one
of them accepts is the host the other sees.

- **Addresses** are read as the C library's `inet_aton` reads them (which `getaddrinfo`, and so
  every client that connects by name, falls back on): one to four parts, each decimal, octal
  (a leading `0`) or hexadecimal (`0x`), the last part filling the remaining bytes. So
  `2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376` and `169.254.43518` are all
  169.254.169.254, and `127.1` and `0` are addresses too. A host whose last label is a number
  but which is no such address (`1.2.3.4.5`, `08.1`, `4294967296`) is refused: a browser
  refuses it, a resolver may not.
- **URLs** are split by `urlsplit`. One a WHATWG parser (browsers, Node's `URL`, many fetch
  tools) would read differently is refused rather than guessed at: a backslash (WHATWG reads
  it as `/`, `urlsplit` as part of the authority, so `http://a.com\\@b.com/` is a.com to one
  and b.com to the other), userinfo (`user@host`), whitespace or control characters, a scheme
  without `//` (`http:evil.com`), a percent sign in the host.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$", re.IGNORECASE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HOST_PORT = re.compile(r"^(?:\[[^\]/?#@]*\]|[^:/?#@\[\]]+)(?::[0-9]*)?$")
# The well-known NAT64 prefix (RFC 6052): 64:ff9b::a.b.c.d reaches a.b.c.d on a NAT64 network.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_DIGITS = {8: frozenset("01234567"), 10: frozenset("0123456789"), 16: frozenset("0123456789abcdefABCDEF")}


class AmbiguousURL(ValueError):
    """A URL or host this module will not guess at; the message says why."""


def parse_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address `text` spells in any `inet_aton` form, or None when it spells none."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        if part[:2].lower() == "0x":
            digits, base = part[2:] or "0", 16
        elif len(part) > 1 and part.startswith("0"):
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        if not digits or not set(digits) <= _DIGITS[base]:
            return None
        numbers.append(int(digits, base))
    *leading, last = numbers
    if any(number > 255 for number in leading) or last >= 256 ** (4 - len(leading)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def ip_address_of(host: str) -> IPAddress | None:
    """The address `host` names when it is an IP literal (`[::1]`, `::1`, any `inet_aton`
    form of IPv4, one trailing dot allowed), else None."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    return parse_ipv4(text[:-1] if text.endswith(".") else text)


def ip_network_of(text: str) -> IPNetwork | None:
    """The network `text` names (`10.0.0.0/8`, `fe80::/10`, or one address as a network of
    one), else None."""
    address, slash, prefix = text.strip().partition("/")
    found = ip_address_of(address)
    if found is None:
        return None
    if not slash:
        return ipaddress.ip_network(found)
    try:
        return ipaddress.ip_network(f"{found}/{prefix}")
    except ValueError:
        return None


def reached_addresses(address: IPAddress) -> tuple[IPAddress, ...]:
    """`address` and the IPv4 address an IPv6 one reaches when it embeds one (IPv4-mapped,
    IPv4-compatible, NAT64, 6to4): the addresses a connection to it may end at."""
    if isinstance(address, ipaddress.IPv4Address):
        return (address,)
    embedded: list[IPAddress] = [address]
    if address.ipv4_mapped is not None:
        embedded.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        embedded.append(address.sixtofour)
    packed = int(address)
    if address in _NAT64 or (packed >> 32 == 0 and packed > 1):  # NAT64, or IPv4-compatible (::a.b.c.d)
        embedded.append(ipaddress.IPv4Address(packed & 0xFFFFFFFF))
    return tuple(embedded)


def is_loopback_address(address: IPAddress) -> bool:
    """True when a connection to `address` stays on this machine: a loopback address, in any
    IPv6 form that embeds one."""
    return any(found.is_loopback for found in reached_addresses(address))


def is_local_destination(host: str) -> bool:
    """True for every destination that reaches this machine's own listeners: loopback
    addresses in any spelling, the unspecified address (`0`, `0.0.0.0`, `::`, which connect
    to this machine), and the names `localhost` and `*.localhost` (RFC 6761)."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    address = ip_address_of(host)
    return address is not None and any(found.is_loopback or found.is_unspecified for found in reached_addresses(address))


def url_host(value: str) -> str:
    """The host a URL (or `host[:port]`) connects to, in one spelling: a name lower-case,
    IDNA-encoded and without a trailing dot; an address as `ipaddress` writes it (`::1`, not
    `[::1]`). Raises AmbiguousURL for one that names no host or that parsers read differently."""
    if any(char.isspace() or ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in value):
        raise AmbiguousURL("it holds whitespace or control characters, which parsers drop or keep differently")
    if "\\" in value:
        raise AmbiguousURL("it holds a backslash, which browsers read as '/' and Python's urlsplit as part of the host")
    if _HOST_PORT.match(value):
        url = "//" + value
    elif _SCHEME.match(value) and value[value.index(":") + 1 :].startswith("//"):
        url = value
    elif _SCHEME.match(value):
        raise AmbiguousURL("a scheme must be followed by '//' (browsers read 'http:host' as a host, Python as a path)")
    else:
        raise AmbiguousURL("it is neither a URL (scheme://host/...) nor host[:port]")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError as exc:
        raise AmbiguousURL(f"it is not a valid URL: {exc}") from None
    if "@" in parts.netloc:
        raise AmbiguousURL("it holds userinfo (user@host), which hides the host a reader sees")
    host = parts.hostname or ""
    if not host:
        raise AmbiguousURL("it names no host")
    if "%" in host:
        raise AmbiguousURL("its host holds a percent sign, which browsers decode and Python does not")
    if parts.netloc.startswith("["):
        address = ip_address_of(host)
        if address is None:
            raise AmbiguousURL(f"[{host}] is not an IPv6 address")
        return str(address)
    return host_name(host)


def host_name(host: str) -> str:
    """A host without a scheme (a name or an address) in the one spelling `url_host` returns.
    Raises AmbiguousURL for one that is neither."""
    text = host.lower()
    text = text[:-1] if text.endswith(".") else text
    if not text or text.endswith("."):
        raise AmbiguousURL(f"{host!r} is not a host name")
    if not text.isascii():
        # IDNA first: it maps full-width digits and dots to ASCII, as browsers do.
        try:
            text = text.encode("idna").decode("ascii")
        except UnicodeError:
            raise AmbiguousURL(f"{host!r} is not a valid international domain name") from None
    if ":" in text or _NUMERIC_LABEL.match(text.rsplit(".", 1)[-1]):
        # A last label that is a number makes the whole host an address (WHATWG), and
        # inet_aton reads it as one: it must be one.
        address = ip_address_of(text)
        if address is None:
            raise AmbiguousURL(f"{host!r} looks like an IP address but is none")
        return str(address)
    if not all(_LABEL.match(label) for label in text.split(".")):
        raise AmbiguousURL(f"{host!r} is not a host name")
    return text
