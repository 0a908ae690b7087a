"""Where a webhook or an MCP server may point: no server-side request forgery.

A URL is ``https``, or ``http`` to a private, loopback or link-local address when
``HANGO_WEBHOOK_ALLOW_PRIVATE_URLS`` is on. Private, loopback, link-local (cloud metadata), multicast, reserved
and unspecified addresses, in IPv4, IPv6 and IPv4 inside IPv6, are refused unless that setting is on. The rule is
applied when the webhook is created and again at each delivery, to the addresses the name resolves to then; the
delivery connects to the address it checked, so a name re-resolving elsewhere in between changes nothing.

The checks know nothing of webhooks beyond this text: whatever else hango lets a tenant point at a URL (MCP
servers) calls :func:`resolve` with its own setting, and reports a :class:`RefusedUrl` the same way.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedUrl(ValueError):
    """The URL, or an address its name resolves to, is not one hango may send a request to.

    The message is for whoever gave the URL, and never names an address the host resolved to: a tenant's admin
    would learn what the server's internal names resolve to. That detail is in :meth:`log_fields`, for the
    server's log only.
    """

    def __init__(self, reason: str, *, host: str | None = None, address: IPAddress | None = None) -> None:
        super().__init__(reason)
        self.host = host
        self.address = address

    def log_fields(self) -> dict[str, str | None]:
        """What a log line about the refusal carries: the reason, the URL's host and the refused address (never the
        whole URL, whose path or query may hold a credential of the receiver)."""
        address = str(self.address) if self.address is not None else None
        return {"reason": str(self), "host": self.host, "address": address}


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
        reason = "resolves to a private, loopback, link-local or reserved address"
        raise RefusedUrl(reason, host=parts.hostname, address=refused[0])
    if parts.scheme == "http" and not (allow_private and len(refused) == len(addresses)):
        raise RefusedUrl(
            "must be an https URL (plain http only to a private address, when allowed)", host=parts.hostname
        )
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
        raise RefusedUrl(f"host {host!r} does not resolve", host=host) from exc
    addresses: list[IPAddress] = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise RefusedUrl(f"host {host!r} does not resolve", host=host)
    return addresses
