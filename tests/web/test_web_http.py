"""The web view over real HTTP against a running `moss serve --http` daemon: every page for an
empty and a full workspace, hostile content shown escaped, the buttons with their CSRF token,
cross-origin and rebinding requests refused, signing in with a token, and the event stream."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import run_cli
from helpers import wait_for
from web_support import (
    HUGE_LINE,
    Answer,
    EventStream,
    Full,
    Served,
    board_task,
    csrf_of,
    fill_workspace,
    git,
    make_workspace,
    request,
    serve,
)

from moss_files.board import claims, editing
from moss_files.foundation.context import Context

ESCAPED_SCRIPT = "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;"
TOKEN = "web-t0ken-for-tests"


def assert_safe(text: str, *, fragment: bool = False) -> None:
    """No markup from a file made it into the page as markup."""
    assert "<script>alert" not in text and "<img src=x onerror" not in text
    assert not re.search(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", text, re.IGNORECASE)
    assert text.count("<script") == (0 if fragment else 1)  # the page's own script only


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Full, Served]]:
    """One full workspace and its daemon, shared by the read-only tests of this module."""
    home = tmp_path_factory.mktemp("home")
    (home / "gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        env.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
        env.setenv("GIT_CONFIG_NOSYSTEM", "1")
        made = fill_workspace(tmp_path_factory.mktemp("full") / "project")
        with serve(made.root) as served:
            yield made, served


def test_every_page_renders_for_an_empty_workspace(repo: Path) -> None:
    make_workspace(repo)
    with serve(repo) as served:
        for path in ("/", "/board", "/board?status=ARCHIVED", "/capsules", "/messages", "/memory", "/search", "/search?q=anything", "/agents"):
            page = request(served.base, path)
            assert page.status == 200, (path, page.text)
            assert page.headers["content-type"] == "text/html; charset=utf-8" and "<main" in page.text
            assert "script-src 'self'" in page.headers["content-security-policy"] and page.headers["x-frame-options"] == "DENY"
            assert_safe(page.text)
        assert "No capsules yet" in request(served.base, "/capsules").text
        assert "No agent sessions yet" in request(served.base, "/agents").text
        assert "The inbox is empty." in request(served.base, "/messages").text
        for path in (
            "/tasks/TASK-nope",
            "/capsules/01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "/capsules/01ARZ3NDEKTSV4RRFFQ69G5FAV/history",
            "/agents/ZZZ",
            "/nothing-here",
        ):
            missing = request(served.base, path)
            assert missing.status == 404 and "NOT_FOUND" in missing.text, path
        assert request(served.base, "/board?limit=0").status == 400
        assert request(served.base, "/board?status=NOPE").status == 400
        assert request(served.base, "/static/live.js").headers["content-type"].startswith("text/javascript")
        assert request(served.base, "/static/../../etc/passwd").status == 404


def test_a_workspace_without_its_folders_still_renders(tmp_path: Path) -> None:
    """A git project where nobody ran `moss init`: each page says what is missing."""
    root = tmp_path / "bare"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / ".moss").mkdir()
    with serve(root) as served:
        for path in ("/", "/capsules", "/messages", "/memory", "/search?q=x", "/agents"):
            assert request(served.base, path).status == 200, path
        assert "NOT_FOUND" in request(served.base, "/memory").text  # no .cstack/: said, not hidden


def test_every_page_renders_for_a_full_workspace_with_hostile_content_escaped(full: tuple[Full, Served]) -> None:
    made, served = full
    pages = ["/", "/board?epic=" + made.epic, "/board?status=DONE&limit=500", "/capsules", "/capsules?workspace=evil&deleted=1", "/messages", "/memory"]
    pages += [f"/tasks/{task}" for task in made.tasks.values()]
    pages += [
        f"/capsules/{made.capsule}",
        f"/capsules/{made.hostile_capsule}",
        f"/capsules/{made.capsule}/history",
        f"/capsules/{made.hostile_capsule}/history",
    ]
    pages += ["/search?q=hostile", "/search?q=parser&all=1", "/search?q=kind:task", "/agents", f"/agents/{made.session}"]
    for path in pages:
        page = request(served.base, path)
        assert page.status == 200, (path, page.text[:2000])
        assert_safe(page.text)
    board = request(served.base, "/").text
    for status, task in made.tasks.items():
        assert f'data-task="{task}" data-status="{status}"' in board
    done = re.search(rf'<li class="card" data-task="{made.tasks["DONE"]}".*?</li>', board)
    assert done and "↺ 1" in done.group(0)  # one QA rejection before it was approved
    assert 'data-owner="dev"' in board and "@dev" in board
    assert ESCAPED_SCRIPT in board  # a hostile title, shown as text
    review = request(served.base, f"/tasks/{made.tasks['REVIEW']}").text
    assert ESCAPED_SCRIPT in review and HUGE_LINE in review and "[click me](javascript:alert(1))" in review
    assert "step-1" in review and "no secrets in logs" in review and "TASK_CLAIMED" in review
    assert 'action="/tasks/' in review and "QA approve" in review and "QA reject" in review
    waiting = request(served.base, f"/tasks/{made.tasks['AWAITING_APPROVAL']}").text
    assert "Approve plan" in waiting and "Reject plan" in waiting
    assert "Approve plan" not in request(served.base, f"/tasks/{made.tasks['WORKING']}").text
    capsule = request(served.base, f"/capsules/{made.capsule}").text
    assert "<h2>Objective</h2>" in capsule and "review pending" in capsule
    history = request(served.base, f"/capsules/{made.capsule}/history").text
    commits = re.findall(r"<code>([0-9a-f]{12})</code>", history)
    assert len(commits) == 2 and "login handoff: UI done" in history
    diff = request(served.base, f"/capsules/{made.capsule}/history?base={commits[1]}&to={commits[0]}").text
    assert '<span class="del">-Endpoints done; UI pending.</span>' in diff and '<span class="add">+Endpoints done; UI done; review pending.</span>' in diff
    at = request(served.base, f"/capsules/{made.capsule}/history?at={commits[1]}").text
    assert "UI pending." in at
    evil = request(served.base, f"/capsules/{made.hostile_capsule}").text
    assert ESCAPED_SCRIPT in evil and "&lt;img src=x onerror=alert(1)&gt;" in evil
    messages = request(served.base, "/messages").text
    assert 'data-message="m-hostile"' in messages and ESCAPED_SCRIPT in messages and "UNKNOWN_RECIPIENT" in messages
    memory = request(served.base, "/memory").text
    assert "Write the parser P1" in memory and ESCAPED_SCRIPT in memory and "Use SQLite for the cache &lt;img" in memory and "└──" in memory
    found = request(served.base, "/search?q=hostile").text
    assert 'class="result"' in found and 'data-expand="/expand?' in found
    ids = re.findall(r'<li class="result" data-id="([^"]+)"', found)
    assert ids
    fragment = request(served.base, f"/expand?id={ids[0]}&fragment=1")
    assert fragment.status == 200 and "<html" not in fragment.text and 'class="record"' in fragment.text
    assert_safe(fragment.text, fragment=True)
    session = request(served.base, f"/agents/{made.session}").text
    assert "run.started" in session and "&lt;script&gt;" in session


def test_the_buttons_post_with_a_csrf_token_and_foreign_posts_are_refused(repo: Path) -> None:
    make_workspace(repo)
    ctx = Context(repo)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    waiting = board_task(ctx, epic, "Card form", to="AWAITING_APPROVAL")
    task_file = repo / ".moss" / "board" / "tasks" / f"{waiting}.md"
    before = task_file.read_bytes()
    with serve(repo) as served:
        page = request(served.base, f"/tasks/{waiting}")
        token, cookie = csrf_of(page.text), page.cookies["moss_csrf"]
        assert page.headers["set-cookie"].endswith("HttpOnly; SameSite=Strict")
        own = {"Origin": served.base, "Cookie": f"moss_csrf={cookie}"}
        path = f"/tasks/{waiting}/approve"

        def refused(status: int, code: str, **sent: object) -> None:
            answer = request(served.base, path, method="POST", **sent)  # type: ignore[arg-type]
            assert answer.status == status and code in answer.text, (answer.status, answer.text[:500])
            assert task_file.read_bytes() == before

        refused(403, "ORIGIN_NOT_ALLOWED", headers={**own, "Origin": "http://evil.example"}, form={"csrf": token})
        refused(403, "ORIGIN_NOT_ALLOWED", headers={**own, "Origin": "http://127.0.0.1:1"}, form={"csrf": token})  # another port
        refused(403, "ORIGIN_NOT_ALLOWED", headers={"Cookie": own["Cookie"]}, form={"csrf": token})  # no Origin at all
        refused(403, "CSRF_TOKEN_INVALID", headers=own, form={})
        refused(403, "CSRF_TOKEN_INVALID", headers={"Origin": served.base}, form={"csrf": token})  # no cookie
        refused(403, "CSRF_TOKEN_INVALID", headers={**own, "Cookie": "moss_csrf=forgedforgedforgedforged"}, form={"csrf": token})
        refused(403, "CSRF_TOKEN_INVALID", headers={**own, "Content-Type": "application/json"}, body=b'{"csrf": "x"}')
        refused(415, "UNSUPPORTED_MEDIA_TYPE", headers={**own, "Content-Type": "text/plain"}, body=f"csrf={token}".encode())
        # DNS rebinding: a page on evil.example, re-pointed at 127.0.0.1, names its own host.
        refused(421, "HOST_NOT_ALLOWED", headers={**own, "Host": "evil.example"}, form={"csrf": token})
        rebound = request(served.base, "/", headers={"Host": "evil.example:80"})
        assert rebound.status == 421 and rebound.json()["error"]["code"] == "HOST_NOT_ALLOWED"
        assert request(served.base, "/events", headers={"Host": "evil.example"}).status == 421

        done = request(served.base, path, method="POST", headers=own, form={"csrf": token})
        assert done.status == 303 and done.headers["location"] == f"/tasks/{waiting}?done=approve"
        assert "status: WORKING" in task_file.read_text()
        after = request(served.base, done.headers["location"], headers={"Cookie": own["Cookie"]}).text
        assert "Plan approved" in after and "Approve plan" not in after
        # The same button again: the use case refuses, and the page says why.
        again = request(served.base, path, method="POST", headers=own, form={"csrf": token})
        assert again.status == 409 and "INVALID_TRANSITION" in again.text and "<h1" in again.text
        # A rejection needs its reason, as `moss task reject-plan` does.
        rejected = request(served.base, f"/tasks/{waiting}/reject-plan", method="POST", headers=own, form={"csrf": token, "reason": ""})
        assert rejected.status in (400, 409)
        assert request(served.base, f"/tasks/{waiting}/delete", method="POST", headers=own, form={"csrf": token}).status == 404


def test_qa_buttons_move_the_task_as_the_cli_does(repo: Path) -> None:
    make_workspace(repo)
    ctx = Context(repo)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    review = board_task(ctx, epic, "Card form", to="REVIEW")
    with serve(repo) as served:
        page = request(served.base, f"/tasks/{review}")
        own = {"Origin": served.base, "Cookie": f"moss_csrf={page.cookies['moss_csrf']}"}
        token = csrf_of(page.text)
        back = request(served.base, f"/tasks/{review}/qa-reject", method="POST", headers=own, form={"csrf": token, "reason": "tests pass: no\r\nsecond line"})
        assert back.status == 303
        shown = run_cli("moss", "task", "show", review, "--json", cwd=repo)
        assert '"status": "WORKING"' in shown.stdout and '"reopenCount": 1' in shown.stdout
        assert "tests pass: no\\nsecond line" in shown.stdout  # a textarea's CRLF kept as the files keep lines
        claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")
        from moss_files.board import plans

        plans.complete_task(ctx, task_id=review, worker_id="dev")
        approved = request(served.base, f"/tasks/{review}/qa-approve", method="POST", headers=own, form={"csrf": token, "summary": "looks good"})
        assert approved.status == 303 and "QA approved" in request(served.base, approved.headers["location"], headers=own).text
        assert "status: DONE" in (repo / ".moss" / "board" / "tasks" / f"{review}.md").read_text()


def test_a_token_daemon_asks_to_sign_in_and_keeps_the_token_out_of_urls(repo: Path) -> None:
    make_workspace(repo)
    with serve(repo, "--token", TOKEN) as served:
        first = request(served.base, "/board?epic=x")
        assert first.status == 303 and first.headers["location"] == "/login?next=%2Fboard%3Fepic%3Dx"
        login = request(served.base, first.headers["location"])
        assert login.status == 200 and 'type="password" name="token"' in login.text and TOKEN not in login.text
        cookie = login.cookies["moss_csrf"]
        own = {"Origin": served.base, "Cookie": f"moss_csrf={cookie}"}
        form = {"csrf": csrf_of(login.text), "next": "/board?epic=x"}
        wrong = request(served.base, "/login", method="POST", headers=own, form={**form, "token": "guess"})
        assert wrong.status == 401 and "UNAUTHORIZED" in wrong.text
        assert request(served.base, "/login", method="POST", headers={"Origin": served.base}, form={**form, "token": TOKEN}).status == 403  # no CSRF cookie
        signed = request(served.base, "/login", method="POST", headers=own, form={**form, "token": TOKEN})
        assert signed.status == 303 and signed.headers["location"] == "/board?epic=x" and TOKEN not in signed.headers["location"]
        session_cookie = next(name for name in signed.cookies if name.startswith("moss_session_"))
        assert "HttpOnly; SameSite=Strict" in signed.headers["set-cookie"]
        jar = f"moss_csrf={cookie}; {session_cookie}={signed.cookies[session_cookie]}"
        board = request(served.base, "/", headers={"Cookie": jar})
        assert board.status == 200 and "Sign out" in board.text
        assert request(served.base, "/", headers={"Authorization": f"Bearer {TOKEN}"}).status == 200
        assert request(served.base, "/", headers={"Authorization": "Bearer nope"}).status == 303
        assert request(served.base, "/events", headers={}).status == 401
        assert request(served.base, "/static/style.css").status == 200  # the sign-in page needs it
        # Somewhere else after signing in is never another site.
        away = request(served.base, "/login", method="POST", headers=own, form={**form, "token": TOKEN, "next": "//evil.example/x"})
        assert away.headers["location"] == "/"
        # The MCP endpoint keeps its own rule: the bearer header, never the cookie.
        mcp = request(served.base, "/mcp", method="POST", headers={"Cookie": jar, "Content-Type": "application/json"}, body=b"{}")
        assert mcp.status == 401 and mcp.json()["error"]["code"] == "UNAUTHORIZED"
        out = request(served.base, "/logout", method="POST", headers={"Origin": served.base, "Cookie": jar}, form={"csrf": csrf_of(board.text)})
        assert out.status == 303 and out.headers["location"] == "/login"
        assert request(served.base, "/", headers={"Cookie": jar}).status == 303  # that session is gone


def test_the_event_stream_follows_file_changes_and_ends_when_the_daemon_stops(repo: Path) -> None:
    make_workspace(repo)
    ctx = Context(repo)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    editing.create_task(ctx, epic_id=epic, title="Card form", status="working")
    git(repo, "add", "-A")
    with serve(repo) as served:
        stream = EventStream(served.base)
        try:
            name, hello = stream.next_event()
            assert name == "hello" and hello["watching"] in ("inotify", "polling")
            for _ in range(3):  # rendering pages reads files; reading is no change
                assert request(served.base, "/").status == 200
                assert request(served.base, "/search?q=card").status == 200  # the search index writes its cache
            run_cli("cstack", "add", "Write the parser", cwd=repo)
            name, change = stream.next_event()
            assert name == "change" and change["kinds"] == ["memory"]
            claimed = run_cli("moss", "task", "claim", "-w", "dev", "--json", cwd=repo)
            assert claimed.returncode == 0, claimed.stderr
            name, change = stream.next_event()
            while name == "change" and change["kinds"] == ["memory"]:
                # The cstack write's file events may reach the watcher in two bursts on a busy
                # machine (seen once in a full run): a second memory change, then the claim's.
                name, change = stream.next_event()
            assert name == "change" and "board" in change["kinds"] and change["version"] >= 2
        finally:
            stream_open = stream
        # Leaving `serve` sends SIGTERM with the stream still open: the daemon ends it and exits 0.
    stream_open.close()


def test_an_envoy_root_shows_each_sleeves_mailbox_and_follows_its_changes(repo: Path) -> None:
    """An envoy root (child folders that hold .needlecast/): a tab per sleeve, each sleeve's own
    inbox and outbox, the root's dead letters; a message routed into a sleeve's inbox is a
    `messages` change on the event stream."""
    import needlecast
    from needlecast import mailbox

    make_workspace(repo)
    for name in ("alice", "bob"):
        mailbox.init_mailbox(repo / name, "v1")
    needlecast.send(Context(repo / "alice", sleeve="alice"), body="Waiting in the outbox of alice", to=["bob"], thread="t-wait")
    with serve(repo) as served:
        page = request(served.base, "/messages")
        assert page.status == 200, page.text[:2000]
        names = re.findall(r'<h2 class="sleeve" data-sleeve="([^"]+)"', page.text)
        assert len(names) == 1  # one sleeve shown at a time, the others as tabs
        for name in ("alice", "bob"):
            assert f'href="/messages?sleeve={name}"' in page.text
        alice = request(served.base, "/messages?sleeve=alice").text
        outbox = alice.split('id="outbox"', 1)[1]
        assert 'data-sleeve="alice"' in alice and "Waiting in the outbox of alice" in outbox
        bob = request(served.base, "/messages?sleeve=bob").text
        assert "Waiting in the outbox" not in bob
        assert request(served.base, "/messages?sleeve=nobody").status == 404
        stream = EventStream(served.base)
        try:
            assert stream.next_event()[0] == "hello"
            routed = run_cli("needlecast", "route", "--once", "--json", cwd=repo)
            assert routed.returncode == 0, routed.stderr
            name, change = stream.next_event()
            assert name == "change" and "messages" in change["kinds"]
        finally:
            stream.close()
        bob = request(served.base, "/messages?sleeve=bob").text
        assert "Waiting in the outbox of alice" in bob.split('id="inbox"', 1)[1].split('id="outbox"', 1)[0]


# --------------------------------------------------------------------------- slow clients, tokens


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the answer on `sock`, read until the server closes."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return int(lines[0].split()[1]), {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}, body


def test_a_body_shorter_than_its_content_length_gets_408_not_an_endless_wait(repo: Path) -> None:
    """The daemon (MCP endpoint and pages) answers a body that stops coming with 408
    REQUEST_TIMEOUT, and one cut short by the client closing its side with 400."""
    make_workspace(repo)
    with serve(repo) as served:
        port = urlsplit(served.base).port
        for path, content_type in (("/mcp", "application/json"), ("/login", "application/x-www-form-urlencoded")):
            head = f"POST {path} HTTP/1.1\r\nHost: {served.host}\r\nContent-Type: {content_type}\r\nContent-Length: 100\r\n\r\n"
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(head.encode() + b'{"jsonrpc"')
                status, _, body = read_answer(sock)
            assert (status, json.loads(body)["error"]["code"]) == (408, "REQUEST_TIMEOUT"), path
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(head.encode() + b'{"jsonrpc"')
                sock.shutdown(socket.SHUT_WR)
                status, _, body = read_answer(sock)
            assert (status, json.loads(body)["error"]["code"]) == (400, "INVALID_REQUEST"), path
        assert request(served.base, "/static/style.css").status == 200


@pytest.mark.slow
def test_slow_clients_hold_nothing_and_are_refused_at_the_head_deadline(repo: Path) -> None:
    """Two hundred connections trickling a head that never ends (or silent) while pages and the
    MCP endpoint answer; a trickling one gets 408 REQUEST_TIMEOUT at the 10 s head deadline
    (uvicorn waited for ever)."""
    make_workspace(repo)
    with serve(repo) as served:
        port = urlsplit(served.base).port
        slow = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(200)]
        try:
            for sock in slow[::2]:
                sock.sendall(f"GET /board HTTP/1.1\r\nHost: {served.host}\r\nX-Slow: a".encode())
            for _ in range(10):
                assert request(served.base, "/static/style.css").status == 200
                ping = request(served.base, "/mcp", method="POST", headers={"Content-Type": "application/json"}, body=b"{}")
                assert ping.status in (400, 406), ping.status  # the SDK's own answer to a body that is no JSON-RPC message
                for sock in slow[::2]:
                    sock.sendall(b"a")
            status, _, body = read_answer(slow[0])
            assert (status, json.loads(body)["error"]["code"]) == (408, "REQUEST_TIMEOUT")
            assert slow[1].recv(10) == b""  # silent: closed without an answer
        finally:
            for sock in slow:
                sock.close()


def test_the_bearer_scheme_is_read_in_any_case_by_the_pages_and_the_mcp_endpoint(repo: Path) -> None:
    make_workspace(repo)
    with serve(repo, "--token", TOKEN) as served:
        for scheme in ("bearer", "BEARER", "Bearer"):
            assert request(served.base, "/", headers={"Authorization": f"{scheme} {TOKEN}"}).status == 200, scheme
            mcp = request(served.base, "/mcp", method="POST", headers={"Authorization": f"{scheme} {TOKEN}", "Content-Type": "application/json"}, body=b"{}")
            assert mcp.status != 401, scheme
        assert (
            request(served.base, "/mcp", method="POST", headers={"Authorization": f"Basic {TOKEN}", "Content-Type": "application/json"}, body=b"{}").status
            == 401
        )


def sign_in(served: Served, token: str, *, source: str = "127.0.0.1") -> Answer:
    """One sign-in attempt through the form, from the loopback address `source`."""
    login = request(served.base, "/login")
    cookie = login.cookies["moss_csrf"]
    form = {"csrf": csrf_of(login.text), "next": "/", "token": token}
    return request(served.base, "/login", method="POST", headers={"Origin": served.base, "Cookie": f"moss_csrf={cookie}"}, form=form, source=source)


@pytest.mark.slow
def test_wrong_tokens_slow_down_the_client_that_gives_them_and_no_other(repo: Path) -> None:
    """After three wrong tokens a client (its address) waits before its next try: 429
    TOO_MANY_ATTEMPTS with Retry-After, the token unchecked, whatever it is, through the form,
    the pages' header or the MCP endpoint; the wait doubles with each further failure (1, 2, 4
    s ... at most 30). Another address is not slowed down; once the wait is over the right token
    signs in, which clears the count. (Before, 200 wrong tokens took 0.3 s.)"""
    make_workspace(repo)
    with serve(repo, "--token", TOKEN) as served:
        for _ in range(3):
            assert sign_in(served, "guess").status == 401
        # Guess on, each time the wait is over, until the wait is 4 s long (1 s, 2 s, then 4 s):
        # long enough for the checks below to run inside it on a loaded machine.
        waits: list[int] = []
        for _ in range(20):  # a handful is enough; without a throttle every try is a plain 401
            answer = sign_in(served, "guess")
            assert answer.status in (401, 429)
            if answer.status == 429:
                assert "TOO_MANY_ATTEMPTS" in answer.text
                waits.append(int(answer.headers["retry-after"]))
                if waits[-1] >= 3:
                    break
                wait_for(lambda: sign_in(served, "guess").status == 401, timeout=40, message="the wait over")
        assert len(waits) >= 2 and waits[0] <= 1 and 3 <= waits[-1] <= 4, waits
        assert sign_in(served, TOKEN).status == 429  # not even checked while it must wait
        header = request(served.base, "/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert header.status == 429 and header.json()["error"]["code"] == "TOO_MANY_ATTEMPTS" and "retry-after" in header.headers
        mcp = request(served.base, "/mcp", method="POST", headers={"Authorization": "Bearer guess", "Content-Type": "application/json"}, body=b"{}")
        assert mcp.status == 429 and mcp.json()["error"]["code"] == "TOO_MANY_ATTEMPTS"
        assert sign_in(served, TOKEN, source="127.0.0.2").status == 303  # another client is not slowed down
        signed = wait_for(lambda: (answer := sign_in(served, TOKEN)).status == 303 and answer, timeout=40, message="the wait over")
        assert signed.headers["location"] == "/"
        for _ in range(2):  # the right token cleared the count: two free tries again
            assert sign_in(served, "guess").status == 401
        assert request(served.base, "/", headers={"Authorization": f"bearer {TOKEN}"}).status == 200


# --------------------------------------------------------------------------- issue 28


def test_an_empty_board_says_how_to_add_a_task_and_a_limit_above_the_most_is_the_most(repo: Path) -> None:
    make_workspace(repo)
    with serve(repo) as served:
        board = request(served.base, "/board").text
        assert "No tasks yet." in board and 'action="/tasks/new"' in board and 'name="epic_title"' in board  # no epic yet: the form names one
        assert request(served.base, "/board?limit=999999").status == 200
        assert request(served.base, "/board?done=999999&status=DONE&offset=0").status == 200
        assert request(served.base, "/board?limit=-1").status == 400 and request(served.base, "/board?offset=x").status == 400


def test_a_new_task_on_an_empty_board_makes_its_epic_as_the_commands_do(repo: Path) -> None:
    make_workspace(repo)
    with serve(repo) as served:
        page = request(served.base, "/board")
        own = {"Origin": served.base, "Cookie": f"moss_csrf={page.cookies['moss_csrf']}"}
        form = {
            "csrf": csrf_of(page.text),
            "next": "/board",
            "title": "Card form",
            "epic_title": "Checkout",
            "priority": "HIGH",
            "status": "BACKLOG",
            "description": "",
        }
        made = request(served.base, "/tasks/new", method="POST", headers=own, form=form)
        assert made.status == 303 and made.headers["location"].startswith("/board?created=TASK-")
        task = made.headers["location"].split("created=")[1]
        shown = json.loads(run_cli("moss", "task", "show", task, "--json", cwd=repo).stdout)
        epics = json.loads(run_cli("moss", "epic", "list", "--json", cwd=repo).stdout)["epics"]
        assert (
            shown["title"] == "Card form" and shown["priority"] == "HIGH" and [e["title"] for e in epics] == ["Checkout"] and shown["epicId"] == epics[0]["id"]
        )
        assert f'Created <a href="/tasks/{task}">' in request(served.base, made.headers["location"]).text
        # The script's posts are answered with JSON, refusals too.
        refused = request(served.base, "/tasks/new", method="POST", headers={**own, "X-Moss-Fetch": "1"}, form={**form, "title": ""})
        assert refused.status == 400 and refused.json()["error"]["code"] == "INVALID_REQUEST"
        moved = request(
            served.base, f"/tasks/{task}/move", method="POST", headers={**own, "X-Moss-Fetch": "1"}, form={"csrf": form["csrf"], "status": "REVIEW"}
        )
        assert moved.status == 409 and moved.json()["error"]["code"] == "INVALID_TRANSITION"


def test_no_navigation_before_signing_in_and_a_browser_is_refused_with_a_page(repo: Path) -> None:
    make_workspace(repo)
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    with serve(repo, "--token", TOKEN) as served:
        login = request(served.base, "/login", headers=browser)
        assert login.status == 200 and "Sign in" in login.text
        assert '<nav aria-label="pages">' not in login.text and 'type="search"' not in login.text and 'name="moss-csrf"' not in login.text
        signed = request(served.base, "/", headers={**browser, "Authorization": f"Bearer {TOKEN}"})
        assert '<nav aria-label="pages">' in signed.text
        for answer, code in (
            (request(served.base, "/", headers={**browser, "Host": "evil.example"}), "HOST_NOT_ALLOWED"),
            (request(served.base, "/tasks/x/move", method="POST", headers={**browser, "Origin": "http://evil.example"}, form={}), "ORIGIN_NOT_ALLOWED"),
            (request(served.base, "/tasks/x/move", method="POST", headers={**browser, "Origin": served.base}, form={}), "UNAUTHORIZED"),
            (request(served.base, "/static/nothing.css", headers=browser), "NOT_FOUND"),
        ):
            assert answer.headers["content-type"] == "text/html; charset=utf-8" and f"<h1>{code}</h1>" in answer.text, (code, answer.text[:300])
            assert "script-src 'self'" in answer.headers["content-security-policy"] and '<nav aria-label="pages">' not in answer.text
        # A program (no Accept) still gets the JSON body.
        assert request(served.base, "/", headers={"Host": "evil.example"}).json()["error"]["code"] == "HOST_NOT_ALLOWED"


def test_a_live_page_is_sent_only_what_changed(repo: Path) -> None:
    make_workspace(repo)
    ctx = Context(repo)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    tasks = [editing.create_task(ctx, epic_id=epic, title=f"Task {n}")["task"]["id"] for n in range(30)]
    with serve(repo) as served:
        page = request(served.base, "/board")
        render = re.search(r'<main id="main" data-render="([^"]+)"', page.text)
        assert render
        cookie = {"Cookie": f"moss_csrf={page.cookies['moss_csrf']}"}  # as a browser keeps it: the forms' token stays the same
        live = {**cookie, "X-Moss-Live": render.group(1)}
        assert request(served.base, "/board", headers=live).json() == {"render": render.group(1), "title": "Board"}
        editing.update_task(ctx, task_id=tasks[3], title="Renamed")
        diff = request(served.base, "/board", headers=live)
        changed = diff.json()
        assert list(changed["parts"]) == [f"card:{tasks[3]}"] and "lists" not in changed and "main" not in changed
        assert ">Renamed</a>" in changed["parts"][f"card:{tasks[3]}"] and len(diff.body) < 1500
        from moss_files.board import claims

        claims.set_task_status(ctx, task_id=tasks[3], status="PLANNING")
        moved = request(served.base, "/board", headers={**cookie, "X-Moss-Live": changed["render"]}).json()
        assert set(moved["lists"]) == {"col:BACKLOG", "col:PLANNING"} and moved["lists"]["col:PLANNING"] == [f"card:{tasks[3]}"]
        assert {f"card:{tasks[3]}", "head:BACKLOG", "head:PLANNING", "counts"} <= set(moved["parts"])
        # A render the server does not know (restarted, or too old): the whole content.
        assert '<ol class="cards"' in request(served.base, "/board", headers={"X-Moss-Live": "unknown"}).json()["main"]
        assert request(served.base, f"/tasks/{tasks[0]}", headers={"X-Moss-Live": "unknown"}).json()["main"].count("<h1") == 1
