"""Where a webhook may point: no server-side request forgery.

A URL is ``https``, or ``http`` to a private, loopback or link-local address when
``HANGO_WEBHOOK_ALLOW_PRIVATE_URLS`` is on. Private, loopback, link-local (cloud metadata), multicast, reserved
and unspecified addresses, in IPv4, IPv6 and IPv4 inside IPv6, are refused unless that setting is on. The rule is
applied when the webhook is created and again at each delivery, to the addresses the name resolves to then; the
delivery connects to the address it checked, so a name re-resolving elsewhere in between changes nothing.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedUrl(ValueError):
    """The URL, or an address its name resolves to, is not one a webhook may reach."""


@dataclass(frozen=True)
class Target:
    """A checked destination: the URL as given, and the address to connect to."""

    url: SplitResult
    address: IPAddress

    @property
    def host(self) -> str:
        """The URL's host name, for the ``Host`` header and TLS (SNI and the certificate check)."""
        return self.url.hostname or ""

    def connect_url(self) -> str:
        """The URL with its host replaced by the checked address."""
        host = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        netloc = f"{host}:{self.url.port}" if self.url.port else host
        return self.url._replace(netloc=netloc).geturl()

    def host_header(self) -> str:
        """``Host``: the name, and the port when the URL gives one."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.url.port}" if self.url.port else host


def is_public(address: IPAddress) -> bool:
    """Whether an address is on the public internet (IPv4 inside IPv6 judged as the IPv4 it carries)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return is_public(embedded)
    return address.is_global and not address.is_multicast and not address.is_reserved


def parse(url: str, max_length: int) -> SplitResult:
    """Check a URL's form (scheme, host, no credentials, length) before any name is resolved.

    Raises:
        RefusedUrl: saying what is wrong.
    """
    if len(url) > max_length:
        raise RefusedUrl(f"is longer than {max_length} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RefusedUrl("is not a URL") from exc
    if parts.scheme not in ("https", "http"):
        raise RefusedUrl("must be an https URL")
    if not parts.hostname:
        raise RefusedUrl("has no host")
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl("must not carry credentials")
    if port == 0:
        raise RefusedUrl("has no port")
    return parts


def resolve(url: str, *, allow_private: bool, max_length: int) -> Target:
    """Check a URL and the addresses its host resolves to now; the first one is the one to connect to.

    Raises:
        RefusedUrl: the URL's form, its scheme or one of its addresses is refused.
    """
    parts = parse(url, max_length)
    addresses = _addresses(parts)
    refused = [address for address in addresses if not is_public(address)]
    if refused and not allow_private:
        raise RefusedUrl(f"resolves to {refused[0]}, a private, loopback, link-local or reserved address")
    if parts.scheme == "http" and not (allow_private and len(refused) == len(addresses)):
        raise RefusedUrl("must be an https URL (plain http only to a private address, when allowed)")
    return Target(parts, addresses[0])


def _addresses(parts: SplitResult) -> list[IPAddress]:
    host = parts.hostname or ""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise RefusedUrl(f"host {host!r} does not resolve") from exc
    addresses: list[IPAddress] = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise RefusedUrl(f"host {host!r} does not resolve")
    return addresses
