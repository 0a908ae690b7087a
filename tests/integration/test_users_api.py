"""Users and tokens through the HTTP API: roles, one-time tokens, hashing and revocation."""

from __future__ import annotations

import uuid

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.kernel.auth import hash_token
from hango.kernel.models import ApiToken
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, bearer


def test_owner_creates_users_of_every_role_and_their_tokens_work(tenant: TenantFixture, client: FlaskClient) -> None:
    for role in ("owner", "admin", "member"):
        person = tenant.add(role)
        assert person.token.startswith("hango_")
        me = client.get("/v1/users", headers=person.headers)
        assert me.status_code == (200 if role != "member" else 403)


def test_create_user_response_matches_the_contract(tenant: TenantFixture, client: FlaskClient) -> None:
    response = client.post(
        "/v1/users", json={"email": "New@Example.com", "role": "member"}, headers=tenant.owner.headers
    )
    assert response.status_code == 201
    assert set(response.json) == {"id", "email", "role", "token"}
    assert response.json["email"] == "new@example.com"


def test_admin_may_create_members_but_not_owners_or_admins(tenant: TenantFixture, client: FlaskClient) -> None:
    admin = tenant.add("admin")
    tenant.add("member", by=admin)
    for role in ("owner", "admin"):
        response = client.post("/v1/users", json={"email": f"{role}@x.io", "role": role}, headers=admin.headers)
        assert response.status_code == 403
        assert response.json["type"] == "urn:hango:problem:forbidden"


def test_members_cannot_create_or_list_users(tenant: TenantFixture, client: FlaskClient) -> None:
    member = tenant.add("member")
    assert (
        client.post("/v1/users", json={"email": "a@b.io", "role": "member"}, headers=member.headers).status_code == 403
    )
    assert client.get("/v1/users", headers=member.headers).status_code == 403


def test_a_duplicate_email_in_the_tenant_is_a_conflict(tenant: TenantFixture, client: FlaskClient) -> None:
    person = tenant.add("member")
    response = client.post("/v1/users", json={"email": person.email, "role": "admin"}, headers=tenant.owner.headers)
    assert response.status_code == 409
    assert response.json["type"] == "urn:hango:problem:conflict"


def test_the_same_person_can_belong_to_two_tenants(make_tenant, client: FlaskClient) -> None:  # type: ignore[no-untyped-def]
    first, second = make_tenant("one"), make_tenant("two")
    person = first.add("member")
    response = client.post("/v1/users", json={"email": person.email, "role": "admin"}, headers=second.owner.headers)
    assert response.status_code == 201
    assert response.json["id"] == str(person.user_id)
    # The old token still only reaches the first tenant, with the first role.
    assert client.get("/v1/users", headers=person.headers).status_code == 403
    assert client.get("/v1/users", headers=bearer(response.json["token"])).status_code == 200


def test_list_users_pages_with_a_cursor(tenant: TenantFixture, client: FlaskClient) -> None:
    created = {str(tenant.owner.user_id)} | {str(tenant.add("member").user_id) for _ in range(4)}
    seen: list[str] = []
    cursor = None
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/users", query_string=query, headers=tenant.owner.headers).json
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(created)
    assert len(seen) == len(set(seen))


def test_tokens_are_stored_only_as_hashes(tenant: TenantFixture, client: FlaskClient, db: Database) -> None:
    response = client.post(f"/v1/users/{tenant.owner.user_id}/tokens", headers=tenant.owner.headers)
    assert response.status_code == 201
    assert set(response.json) == {"id", "token"}
    token = response.json["token"]
    with db.transaction() as session:
        stored = session.scalar(select(ApiToken).where(ApiToken.id == uuid.UUID(response.json["id"])))
    assert stored is not None
    assert stored.token_hash == hash_token(token)
    assert token not in stored.token_hash


def test_a_revoked_token_is_refused_at_once(tenant: TenantFixture, client: FlaskClient) -> None:
    member = tenant.add("member")
    issued = client.post(f"/v1/users/{member.user_id}/tokens", headers=member.headers)
    assert issued.status_code == 201
    extra = bearer(issued.json["token"])
    assert client.post(f"/v1/users/{member.user_id}/tokens", headers=extra).status_code == 201

    assert client.delete(f"/v1/tokens/{issued.json['id']}", headers=member.headers).status_code == 204
    refused = client.post(f"/v1/users/{member.user_id}/tokens", headers=extra)
    assert refused.status_code == 401
    assert refused.json["type"] == "urn:hango:problem:unauthorized"
    # Revoking twice is harmless.
    assert client.delete(f"/v1/tokens/{issued.json['id']}", headers=tenant.owner.headers).status_code == 204


def test_members_manage_only_their_own_tokens(tenant: TenantFixture, client: FlaskClient) -> None:
    alice, bob = tenant.add("member"), tenant.add("member")
    assert client.post(f"/v1/users/{bob.user_id}/tokens", headers=alice.headers).status_code == 403
    bobs = client.post(f"/v1/users/{bob.user_id}/tokens", headers=bob.headers).json
    assert client.delete(f"/v1/tokens/{bobs['id']}", headers=alice.headers).status_code == 403
    assert client.delete(f"/v1/tokens/{bobs['id']}", headers=tenant.owner.headers).status_code == 204


def test_another_tenants_users_and_tokens_are_not_found(make_tenant, client: FlaskClient) -> None:  # type: ignore[no-untyped-def]
    mine, theirs = make_tenant("mine"), make_tenant("theirs")
    their_token = client.post(f"/v1/users/{theirs.owner.user_id}/tokens", headers=theirs.owner.headers).json
    assert client.post(f"/v1/users/{theirs.owner.user_id}/tokens", headers=mine.owner.headers).status_code == 404
    assert client.delete(f"/v1/tokens/{their_token['id']}", headers=mine.owner.headers).status_code == 404
    listed = client.get("/v1/users", headers=mine.owner.headers).json["items"]
    assert str(theirs.owner.user_id) not in {item["id"] for item in listed}
    # Their token still works: nothing was revoked by the refused request.
    assert client.get("/v1/users", headers=bearer(their_token["token"])).status_code == 200


# Who may mint and revoke whose tokens (api.md "Limits and roles"): the user themself, an owner, and an admin only
# for members. Every actor role against every target role, and against themself.
TOKEN_AUTHORITY = {
    ("owner", "owner"): True,
    ("owner", "admin"): True,
    ("owner", "member"): True,
    ("admin", "owner"): False,
    ("admin", "admin"): False,
    ("admin", "member"): True,
    ("member", "owner"): False,
    ("member", "admin"): False,
    ("member", "member"): False,
}


@pytest.mark.parametrize(("actor_role", "target_role"), sorted(TOKEN_AUTHORITY))
def test_token_authority_by_role(tenant: TenantFixture, client: FlaskClient, actor_role: str, target_role: str) -> None:
    actor = tenant.owner if actor_role == "owner" else tenant.add(actor_role)
    target = tenant.add(target_role)
    allowed = TOKEN_AUTHORITY[(actor_role, target_role)]

    minted = client.post(f"/v1/users/{target.user_id}/tokens", headers=actor.headers)
    assert minted.status_code == (201 if allowed else 403), minted.json

    own = client.post(f"/v1/users/{target.user_id}/tokens", headers=target.headers).json
    revoked = client.delete(f"/v1/tokens/{own['id']}", headers=actor.headers)
    assert revoked.status_code == (204 if allowed else 403)
    still_works = client.get("/v1/runs", headers=bearer(own["token"])).status_code == 200
    assert still_works is not allowed, "a refused revoke must leave the token working"


@pytest.mark.parametrize("role", ["owner", "admin", "member"])
def test_everyone_manages_their_own_tokens(tenant: TenantFixture, client: FlaskClient, role: str) -> None:
    person = tenant.owner if role == "owner" else tenant.add(role)
    minted = client.post(f"/v1/users/{person.user_id}/tokens", headers=person.headers)
    assert minted.status_code == 201
    assert client.delete(f"/v1/tokens/{minted.json['id']}", headers=person.headers).status_code == 204
    assert client.get("/v1/runs", headers=bearer(minted.json["token"])).status_code == 401
