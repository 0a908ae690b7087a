"""The reviewers' commands (``hango runs …``, ``hango approvals …``) as a reviewer runs them: real ``hango``
processes against a real gunicorn server and worker; their output, their ``--json`` and their exit statuses."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, finished, pending, suspended_run, tool_results, write_memory
from tests.support.processes import HANGO, remote_cli, settings_env, wait_until

pytestmark = pytest.mark.usefixtures("worker_process")


@pytest.fixture(scope="module")
def base(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


@pytest.fixture
def hango(settings: Settings, base: str) -> Any:
    """Runs ``hango ARGS`` as ``person`` against the server (HANGO_URL and HANGO_TOKEN in its environment)."""
    return remote_cli(settings, base)


def _two_writes(client: FlaskClient, tenant: TenantFixture) -> str:
    calls = [write_memory("a", call_id="call_a"), {**write_memory("b", call_id="call_b")}]
    calls[1]["args"] = {"file_path": "/memories/b.md", "content": "b"}
    return suspended_run(client, tenant, [{"text": "Saving.", "tool_calls": calls}, {"text": "Ok"}])


def test_a_reviewer_lists_shows_and_decides_several_calls_in_one_command(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = _two_writes(client, tenant)
    listed = hango(tenant.owner, "approvals", "list", "--run", run_id, "--json")
    assert listed.returncode == 0, listed.stderr
    items = [json.loads(line) for line in listed.stdout.splitlines()]  # JSON Lines: one object per line
    assert items == pending(client, tenant.owner, run_id)
    assert sorted(item["tool_call_id"] for item in items) == ["call_a", "call_b"]  # one batch: one created_at

    table = hango(tenant.owner, "approvals", "list")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["ID", "RUN", "TOOL", "CALL", "STATE", "CREATED", "ARGUMENTS"]
    assert all(item["id"] in table.stdout for item in items)

    b = next(item for item in items if item["tool_call_id"] == "call_b")
    shown = hango(tenant.owner, "approvals", "show", b["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == b
    human = hango(tenant.owner, "approvals", "show", b["id"])
    assert "tool_name:         write_file" in human.stdout
    assert "/memories/b.md" in human.stdout

    decided = hango(
        tenant.owner, "approvals", "decide", run_id, "--approve", "call_a", "--reject", "call_b", "--message", "no b"
    )
    assert decided.returncode == 0, decided.stderr
    assert f"run {run_id}  queued" in decided.stdout
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    assert results["call_a"]["is_error"] is False
    assert "no b" in results["call_b"]["content"]


def test_show_prints_the_file_the_tool_will_write_and_the_servers_diff(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    spelt = "/memories/notes.md#/../AGENTS.md"
    call = {"name": "write_file", "args": {"file_path": spelt, "content": "new line\n"}, "id": "w"}
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [call]}, {"text": "Ok"}])
    files = f"/v1/agents/{agent_id}/files/memories/AGENTS.md"
    assert client.put(files, json={"content": "old line\n"}, headers=tenant.owner.headers).status_code == 200
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    [item] = pending(client, tenant.owner, run_id)
    shown = hango(tenant.owner, "approvals", "show", item["id"].upper())
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "writes:            /memories/AGENTS.md (the agent's, persists across runs)" in lines
    assert f'                   the call wrote the path as "{spelt}"' in lines
    assert lines[-2:] == ["-old line", "+new line"]
    assert "why it waits:      Writes to the agent's persistent memories and skills need a reviewer." in lines


def test_a_quorum_vote_says_the_call_is_still_pending_with_k_of_n(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    first, second = tenant.add("admin"), tenant.add("admin")
    script = [{"tool_calls": [write_memory("q", call_id="w")]}, {"text": "Ok"}]
    run_id = suspended_run(client, tenant, script, interrupt_on={"write_file": {"approvals_required": 2}})
    voted = hango(first, "approvals", "decide", run_id, "--approve", "w")
    assert voted.returncode == 0, voted.stderr
    assert f"run {run_id}  awaiting_approval" in voted.stdout
    assert "still pending: 1 of 2 approvals" in voted.stdout
    [item] = pending(client, first, run_id)
    shown = hango(first, "approvals", "show", item["id"])
    assert "votes:             1 of 2 approvals" in shown.stdout
    assert f"approve by {first.user_id}" in shown.stdout
    again = hango(first, "approvals", "decide", run_id, "--approve", "w")
    assert again.returncode == 1
    assert "already-voted" in again.stderr or "already has your vote" in again.stderr
    final = hango(second, "approvals", "decide", run_id, "--approve", "w")
    assert final.returncode == 0, final.stderr
    assert f"run {run_id}  queued" in final.stdout
    assert "still pending" not in final.stdout
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"


def test_decide_json_prints_the_result_only(hango: Any, client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = _two_writes(client, tenant)
    edit = json.dumps({"file_path": "/memories/b.md", "content": "edited"})
    decided = hango(
        tenant.owner, "approvals", "decide", run_id, "--json", "--respond", "call_a", "--message", "42",
        "--edit", "call_b", "--args", edit,
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr
    result = json.loads(decided.stdout)
    assert result["run"]["state"] == "queued"
    assert {(a["tool_call_id"], a["decision"]) for a in result["approvals"]} == {
        ("call_a", "respond"),
        ("call_b", "edit"),
    }


def test_a_refused_decision_exits_1_with_the_problem_on_stderr(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    member = tenant.add("member")
    run_id = suspended_run(client, tenant, [{"text": "Saving.", "tool_calls": [write_memory(call_id="c1")]}], by=member)

    as_member = hango(member, "approvals", "decide", run_id, "--approve", "c1")
    assert as_member.returncode == 1
    assert as_member.stdout == ""
    assert as_member.stderr.startswith("error: 403 ")

    unknown = hango(tenant.owner, "approvals", "decide", run_id, "--approve", "nope")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: 400 ")
    assert "\n  decisions[0].tool_call_id: no pending call" in unknown.stderr
    assert unknown.stderr.count("no pending call") == 1  # the detail repeats the field error: printed once

    bad_args = hango(tenant.owner, "approvals", "decide", run_id, "--edit", "c1", "--args", '{"file_path": 3}')
    assert bad_args.returncode == 1
    assert "  decisions[0].args" in bad_args.stderr  # each field error on a line of its own

    assert [a["state"] for a in pending(client, tenant.owner, run_id)] == ["pending"]  # nothing was stored


@pytest.mark.parametrize(
    "args",
    [
        ["--reject", "c1"],  # no --message
        ["--edit", "c1", "--args", "{not json"],
        ["--edit", "c1", "--args", "[1, 2]"],
        ["--approve", "--approve"],  # an approval id takes one decision
        ["--approve", "c1", "--reject", "--message", "no"],  # every decision names its call, or none does
        [],
        ["--maybe", "c1"],
    ],
)
def test_bad_usage_exits_2_and_sends_nothing(
    hango: Any, client: FlaskClient, tenant: TenantFixture, args: list[str]
) -> None:
    run_id = str(uuid.uuid4())  # never asked: the command stops before any request
    result = hango(tenant.owner, "approvals", "decide", run_id, *args)
    assert result.returncode == 2, result.stderr
    assert "Usage:" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("variable", "missing"),
    [("HANGO_TOKEN", "Missing HANGO_TOKEN (or --token)"), ("HANGO_URL", "Missing HANGO_URL (or --url)")],
)
def test_a_missing_url_or_token_is_a_usage_error_naming_its_variable(
    settings: Settings, base: str, variable: str, missing: str
) -> None:
    env = {**settings_env(settings), "HANGO_URL": base, "HANGO_TOKEN": "hango_x"}
    del env[variable]
    for command in (["approvals", "list"], ["runs", "watch", str(uuid.uuid4())], ["agents", "list"]):
        result = subprocess.run([*HANGO, *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1] == f"Error: {missing}"


def test_runs_create_watch_prints_the_events_until_the_run_finishes(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = create_agent(client, tenant.owner, [{"text": "Hello."}])
    created = hango(tenant.owner, "runs", "create", "--agent", agent_id, "--input", "hi", "--watch", "--json")
    assert created.returncode == 0, created.stderr
    run, *events = [json.loads(line) for line in created.stdout.splitlines()]
    assert run["state"] == "queued"
    assert run["agent_id"] == agent_id
    assert events[0]["type"] == "run.queued"
    assert events[-1]["type"] == "run.finished"
    assert events[-1]["data"]["state"] == "succeeded"

    watched = hango(tenant.owner, "runs", "watch", run["id"])
    assert watched.returncode == 0, watched.stderr
    assert [line.split()[1] for line in watched.stdout.splitlines()] == [event["type"] for event in events]


def test_runs_watch_prints_one_readable_line_per_event_and_json_lines_with_json(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    long = "All of it: " + "tea " * 60
    script = [
        {"text": "Looking around.\nThen I answer.", "tool_calls": [{"name": "ls", "args": {"path": "/"}, "id": "l1"}]},
        {"text": long},
    ]
    run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, script))
    finished(client, tenant.owner, run_id)

    watched = hango(tenant.owner, "runs", "watch", run_id)
    assert watched.returncode == 0, watched.stderr
    lines = watched.stdout.splitlines()
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d  \S+.*", line) for line in lines), lines
    described = [line[10:] for line in lines]  # after the time
    assert "message.created         user: go" in described
    assert "message.created         assistant: Looking around. …  calls ls" in described
    assert "tool.started            ls (l1)" in described
    assert "tool.finished           ls (l1)  ok" in described
    assert "message.created         tool: results l1 ok" in described
    assert described[-1] == "run.finished            succeeded"
    [answer] = [line for line in described if line.startswith("message.created         assistant: All of it:")]
    text = answer.split("assistant: ", 1)[1]
    assert text.endswith("…")  # cut, and the cut marked
    assert long.startswith(text[:-1])

    as_json = hango(tenant.owner, "runs", "watch", run_id, "--json")
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [event["type"] for event in events] == [line.split()[0] for line in described]
    assert all(set(event) == {"id", "type", "data"} for event in events)


def test_runs_create_watch_says_where_to_decide_when_the_run_pauses(
    settings: Settings, base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [write_memory(call_id="w1")]}, {"text": "Ok"}])
    env = {**settings_env(settings), "HANGO_URL": base, "HANGO_TOKEN": tenant.owner.token}
    command = [*HANGO, "runs", "create", "--agent", agent_id, "--input", "save it", "--watch"]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as watching:
        try:
            run = wait_until(lambda: _runs(client, tenant.owner, "awaiting_approval"))[0]
            [item] = pending(client, tenant.owner, run["id"])
            assert (
                decide(client, tenant.owner, run["id"], {"approval_id": item["id"], "decision": "approve"}).status_code
                == 200
            )
            out, err = watching.communicate(timeout=60)
        finally:
            if watching.poll() is None:
                watching.kill()
    assert watching.returncode == 0, err
    lines = out.splitlines()
    paused = next(i for i, line in enumerate(lines) if "run.awaiting_approval" in line)
    assert [line.strip() for line in lines[paused + 1 : paused + 4]] == [
        "waiting for a reviewer: write_file (w1)",
        f"inbox:  {base}/inbox/approvals/{item['id']}",
        f"or:     hango approvals decide {item['id']} --approve   (or --edit --args JSON, --reject --message M, "
        "--respond --message M)",
    ]
    assert "approval.decided" in lines[paused + 4]
    assert lines[-1].endswith("run.finished            succeeded")


def _runs(client: FlaskClient, person: Person, state: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = client.get(f"/v1/runs?state={state}", headers=person.headers).json["items"]
    return runs


def test_decide_takes_an_approval_id_alone(hango: Any, client: FlaskClient, tenant: TenantFixture) -> None:
    approved = suspended_run(client, tenant, [{"tool_calls": [write_memory("yes", call_id="c1")]}, {"text": "Ok"}])
    [item] = pending(client, tenant.owner, approved)
    decided = hango(tenant.owner, "approvals", "decide", item["id"], "--approve")
    assert decided.returncode == 0, decided.stderr
    assert decided.stdout.splitlines() == [
        f"run {approved}  queued  agent {agent_of(client, tenant, approved)}",
        "  approve   write_file    c1",
    ]
    assert finished(client, tenant.owner, approved)["state"] == "succeeded"
    assert tool_results(client, tenant.owner, approved)["c1"]["is_error"] is False

    rejected = suspended_run(client, tenant, [{"tool_calls": [write_memory("no", call_id="c2")]}, {"text": "Ok"}])
    [item] = pending(client, tenant.owner, rejected)
    args = ["--reject", "--message", "not today", "--sha256", item["arguments_sha256"], "--json"]
    decided = hango(tenant.owner, "approvals", "decide", item["id"], *args)
    assert decided.returncode == 0, decided.stderr
    [approval] = json.loads(decided.stdout)["approvals"]
    assert (approval["id"], approval["decision"], approval["decision_message"]) == (item["id"], "reject", "not today")
    assert finished(client, tenant.owner, rejected)["state"] == "succeeded"
    assert "not today" in tool_results(client, tenant.owner, rejected)["c2"]["content"]


def agent_of(client: FlaskClient, tenant: TenantFixture, run_id: str) -> str:
    """The agent of a run."""
    agent_id: str = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["agent_id"]
    return agent_id


def test_a_404_says_which_id_was_not_found_as_a_run_or_an_approval(
    hango: Any, client: FlaskClient, tenant: TenantFixture, make_tenant: Any
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="c1")]}])
    [item] = pending(client, tenant.owner, run_id)
    nothing = str(uuid.uuid4())
    for args in ([nothing, "--approve"], [nothing, "--approve", "c1"]):
        result = hango(tenant.owner, "approvals", "decide", *args)
        assert result.returncode == 1
        assert result.stderr == f"error: 404 Not found: no run or approval you can see has the id {nothing}\n"

    approval_as_run = hango(tenant.owner, "approvals", "decide", item["id"], "--approve", "c1")
    assert approval_as_run.returncode == 1
    assert approval_as_run.stderr.startswith(f"error: 404 Not found: {item['id']} is an approval (of run {run_id})")
    assert f"hango approvals decide {item['id']} --approve" in approval_as_run.stderr

    run_as_approval = hango(tenant.owner, "approvals", "decide", run_id, "--approve")
    assert run_as_approval.returncode == 1
    assert run_as_approval.stderr.startswith(f"error: 404 Not found: {run_id} is a run, not an approval")

    hidden = hango(make_tenant("other").owner, "approvals", "decide", item["id"], "--approve")
    assert hidden.stderr == f"error: 404 Not found: no run or approval you can see has the id {item['id']}\n"
    assert [a["state"] for a in pending(client, tenant.owner, run_id)] == ["pending"]  # nothing was decided


def test_a_decision_bound_to_another_digest_is_refused_and_the_one_shown_is_accepted_and_remembered(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"text": "Saving.", "tool_calls": [write_memory(call_id="c1")]}])
    [item] = pending(client, tenant.owner, run_id)
    shown = hango(tenant.owner, "approvals", "show", item["id"])
    assert f"arguments_sha256:  {item['arguments_sha256']}" in shown.stdout

    stale = hango(tenant.owner, "approvals", "decide", run_id, "--approve", "c1", "--sha256", "0" * 64)
    assert stale.returncode == 1
    assert stale.stderr.startswith("error: 409 Stale approval")
    assert [a["state"] for a in pending(client, tenant.owner, run_id)] == ["pending"]

    args = ["--approve", "c1", "--sha256", item["arguments_sha256"], "--remember", "1h", "--json"]
    decided = hango(tenant.owner, "approvals", "decide", run_id, *args)
    assert decided.returncode == 0, decided.stderr
    [approval] = json.loads(decided.stdout)["approvals"]
    assert approval["decision"] == "approve"
    grant = client.get(f"/v1/grants/{approval['remembered_grant_id']}", headers=tenant.owner.headers).json
    assert (grant["tool_name"], grant["when"]) == (
        "write_file",
        {k: {"equals": v} for k, v in item["arguments"].items()},
    )
