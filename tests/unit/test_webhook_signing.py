"""Standard Webhooks signatures, secrets at rest, and which addresses a webhook may reach."""

from __future__ import annotations

import base64
import ipaddress

import pytest
from cryptography.fernet import Fernet

from hango.kernel import addresses
from hango.kernel.errors import ConfigError
from hango.kernel.secret_box import SecretBox
from hango.services.webhooks.signing import new_secret, signature, verify

# The specification's published test vector (standard-webhooks, the reference libraries' tests).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_signature_is_the_specifications_test_vector() -> None:
    assert signature(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE


def test_verify_accepts_one_of_several_signatures_and_refuses_any_change() -> None:
    header = f"v1,bm9wZQ== {VECTOR_SIGNATURE}"
    assert verify(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY, header)
    assert not verify(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP + 1, VECTOR_BODY, header)
    assert not verify(VECTOR_SECRET, "msg_other", VECTOR_TIMESTAMP, VECTOR_BODY, header)
    assert not verify(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, b'{"test": 2432232315}', header)


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_")
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32
    assert first != second


def test_secrets_are_encrypted_with_the_first_key_and_read_with_any() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    secret = new_secret()
    sealed = SecretBox((old,)).seal(secret)
    assert sealed.startswith("fernet:")
    assert secret.removeprefix("whsec_") not in sealed
    assert SecretBox((new, old)).open(sealed) == secret
    with pytest.raises(ConfigError, match="HANGO_WEBHOOK_SECRET_KEYS"):
        SecretBox((new,)).open(sealed)


def test_without_keys_secrets_are_stored_marked_plain_and_still_read_once_keys_exist() -> None:
    secret = new_secret()
    sealed = SecretBox(()).seal(secret)
    assert sealed == "plain:" + secret
    assert SecretBox((Fernet.generate_key().decode(),)).open(sealed) == secret


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",  # noqa: S104 (an address judged, nothing binds)
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "2002:7f00:1::",  # 6to4 around 127.0.0.1
        "64:ff9b::a00:1",
    ],
)
def test_internal_addresses_are_not_public(address: str) -> None:
    assert not addresses.is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_internet_addresses_are_public(address: str) -> None:
    assert addresses.is_public(ipaddress.ip_address(address))


def test_the_connection_goes_to_the_checked_address_with_the_name_for_host_and_tls() -> None:
    target = addresses.resolve("https://localhost:8443/hook?x=1", allow_private=True, max_length=100)
    assert target.connect_url() == "https://127.0.0.1:8443/hook?x=1"
    assert target.host_header() == "localhost:8443"
    assert target.host == "localhost"
    six = addresses.resolve("http://[::1]/h", allow_private=True, max_length=100)
    assert six.connect_url() == "http://[::1]/h"
    assert six.host_header() == "[::1]"


@pytest.mark.parametrize("url", ["https://10.1.2.3/hook", "https://[fd00:ec2::254]/hook"])
def test_a_refusal_names_the_kind_of_address_and_keeps_the_address_for_the_log(url: str) -> None:
    with pytest.raises(addresses.RefusedUrl) as refused:
        addresses.resolve(url, allow_private=False, max_length=100)
    host = url.split("/")[2].strip("[]")
    assert str(refused.value) == "resolves to a private, loopback, link-local or reserved address"
    assert refused.value.log_fields() == {"reason": str(refused.value), "host": host, "address": host}
