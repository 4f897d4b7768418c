"""AI summaries through a local Ollama server: a real HTTP server on loopback speaking Ollama's
API (`GET /api/tags`, `POST /api/generate` with `stream: false`), up, down, slow and answering
garbage; the heuristic summary as the fallback every time; a person's summary never replaced;
`moss index rebuild --summaries ai` writing the index only."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from mcp_support import make_workspace

from moss_files.foundation import config, document
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidDocument
from moss_files.foundation.ids import IdSource, seeded_random
from moss_files.index import service as search
from moss_files.loopflow import ai, service
from moss_files.loopflow.insights import Update
from moss_files.loopflow.sessions import Handoff

LONG = (
    "The search index is rebuilt into a temporary file and swapped in with a rename, so searches keep "
    "reading the old database until the new one is complete. A shared lock keeps the swap from "
    "happening under an open connection."
)
OTHER = (
    "Every write of an artifact file goes through a temporary file in the same folder, an fsync and a "
    "rename, then an fsync of the folder, so a power cut leaves the old bytes or the new ones."
)
DEADLINE = 30.0  # seconds a call may take before the test calls it hung


class FakeOllama:
    """A loopback HTTP server speaking Ollama's API. `mode`: ok, slow (generate waits until the
    test ends), html, no_response, empty, error_500, model_gone (generate 404), no_model (tags
    lack the model), done_false. Requests are recorded as (method, path, body)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[tuple[str, str, Any]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: str, kind: str = "application/json") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, None))
                if self.path != "/api/tags":
                    return self.reply(404, "404 page not found", "text/plain")
                names = [] if fake.mode == "no_model" else [{"name": "phi3:latest", "model": "phi3:latest", "size": 2176178913}]
                self.reply(200, json.dumps({"models": names}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(("POST", self.path, body))
                mode = fake.mode
                if mode == "slow":
                    fake.release.wait(DEADLINE)
                    return self.reply(200, json.dumps({"response": "Too late.", "done": True}))
                if mode == "html":
                    return self.reply(200, "<html><body>Ollama is running</body></html>", "text/html")
                if mode == "error_500":
                    return self.reply(500, json.dumps({"error": "llama runner process has terminated"}))
                if mode == "model_gone":
                    return self.reply(404, json.dumps({"error": f"model '{body['model']}' not found, try pulling it first"}))
                text = body["prompt"].rsplit("\n\n", 1)[-1]
                response = {
                    "ok": f"Summary: {' '.join(text.split()[:6]).rstrip('.,')}, in short.\n\nI hope this helps!",
                    "no_response": None,
                    "empty": "  \n ",
                    "done_false": "Half a summ",
                }[mode]
                reply: dict[str, Any] = {"model": body["model"], "created_at": "2026-01-21T10:00:00Z", "done": mode != "done_false"}
                if response is not None:
                    reply["response"] = response
                self.reply(200, json.dumps(reply))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-ollama")

    def generated(self) -> list[Any]:
        return [body for method, _path, body in self.requests if method == "POST"]


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    fake = FakeOllama()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.release.set()
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join(DEADLINE)


def free_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def workspace(tmp_path: Path, endpoint: str, *, extra: str = "", enabled: bool = True) -> Context:
    """A workspace whose `.moss/config.toml` points the summariser at `endpoint`."""
    root = make_workspace(tmp_path / "ws")
    settings = f'\n[summaries]\nai = {"true" if enabled else "false"}\nollama_endpoint = "{endpoint}"\nai_threshold = 120\ntimeout_seconds = 1\n{extra}'
    with open(root / ".moss" / "config.toml", "a", encoding="utf-8") as handle:
        handle.write(settings)
    clock = Clock()
    return Context(root, clock=clock, ids=IdSource(clock, seeded_random(3)), config=config.load_config(root))


def meta_of(ctx: Context, relpath: str) -> dict[str, Any]:
    return dict(document.parse((ctx.root / relpath).read_text()).meta)


def within_deadline(call: Any) -> Any:
    """`call()` in a thread, failing the test if it has not returned by DEADLINE."""
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.update(result=call()))
    worker.start()
    worker.join(DEADLINE)
    assert not worker.is_alive(), "the summariser waited past its timeout"
    return box["result"]


# --------------------------------------------------------------------------- writing insights


def test_with_the_server_up_an_insight_gets_the_models_summary_marked_as_generated(tmp_path: Path, ollama: FakeOllama) -> None:
    ctx = workspace(tmp_path, ollama.url)
    made = service.remember(ctx, LONG)
    assert made["summary"] == "The search index is rebuilt into, in short."
    assert (made["summary_source"], made["summary_fallback"]) == ("ai", None)
    meta = meta_of(ctx, made["path"])
    assert (meta["summary"], meta["summary_source"]) == (made["summary"], "ai")
    request = ollama.generated()[0]
    assert (request["model"], request["stream"]) == ("phi3", False) and LONG[:60] in request["prompt"]
    assert [(method, path) for method, path, _ in ollama.requests] == [("GET", "/api/tags"), ("POST", "/api/generate")]
    service.remember(ctx, OTHER)  # the same context knows the server is there: no second GET
    assert [(method, path) for method, path, _ in ollama.requests][2:] == [("POST", "/api/generate")]
    assert search.scan(ctx, "kind:insight searches")["matches"][0]["summary"] == "The search index is rebuilt into, in short."


def test_nothing_is_asked_when_ai_is_off_the_text_is_short_or_a_person_gave_the_summary(tmp_path: Path, ollama: FakeOllama) -> None:
    off = workspace(tmp_path / "off", ollama.url, enabled=False)
    made = service.remember(off, LONG)
    assert (made["summary_source"], made["summary_fallback"]) == ("heuristic", None)
    assert "summary" not in meta_of(off, made["path"])
    on = workspace(tmp_path / "on", ollama.url)
    short = service.remember(on, "Locks have deadlines.")
    assert (short["summary_source"], short["summary_fallback"], short["summary"]) == ("heuristic", "short", "Locks have deadlines.")
    given = service.remember(on, LONG, summary="Rebuilds swap in by rename.")
    assert given["summary_source"] == "human" and "summary_source" not in meta_of(on, given["path"])
    assert ollama.requests == []


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("html", "bad_reply"),
        ("no_response", "bad_reply"),
        ("empty", "bad_reply"),
        ("done_false", "bad_reply"),
        ("error_500", "http_error"),
        ("model_gone", "model_missing"),
        ("no_model", "model_missing"),
    ],
)
def test_garbage_from_the_server_falls_back_on_the_heuristic_summary(tmp_path: Path, ollama: FakeOllama, mode: str, reason: str) -> None:
    ollama.mode = mode
    ctx = workspace(tmp_path, ollama.url)
    made = service.remember(ctx, LONG)
    heuristic = "The search index is rebuilt into a temporary file and swapped in with a rename, so searches keep…"
    assert (made["summary"], made["summary_source"], made["summary_fallback"]) == (heuristic, "heuristic", reason)
    meta = meta_of(ctx, made["path"])
    assert "summary" not in meta and "summary_source" not in meta  # the heuristic one is made when read, never stored


def test_with_the_server_down_the_heuristic_summary_is_used_and_it_is_asked_once(tmp_path: Path) -> None:
    ctx = workspace(tmp_path, f"http://127.0.0.1:{free_port()}")
    first = service.remember(ctx, LONG)
    second = service.remember(ctx, OTHER)
    assert (first["summary_source"], first["summary_fallback"]) == ("heuristic", "unreachable")
    assert (second["summary_source"], second["summary_fallback"]) == ("heuristic", "unreachable")
    assert "summary" not in meta_of(ctx, first["path"])


def test_a_slow_server_times_out_and_the_heuristic_summary_is_used(tmp_path: Path, ollama: FakeOllama) -> None:
    ollama.mode = "slow"
    ctx = workspace(tmp_path, ollama.url)
    made = within_deadline(lambda: service.remember(ctx, LONG))
    assert (made["summary_source"], made["summary_fallback"]) == ("heuristic", "timeout")
    again = within_deadline(lambda: service.remember(ctx, OTHER))
    assert again["summary_fallback"] == "timeout" and len(ollama.generated()) == 1  # a slow server is not waited on twice


def test_new_content_replaces_a_generated_summary_and_never_a_persons(tmp_path: Path, ollama: FakeOllama) -> None:
    ctx = workspace(tmp_path, ollama.url)
    made = service.remember(ctx, LONG)
    changed = service.update_insight(ctx, made["id"], Update(content=OTHER))
    assert changed["insight"]["summary"] == "Every write of an artifact file, in short."
    assert changed["changed"] == ["summary", "content"] and meta_of(ctx, made["path"])["summary_source"] == "ai"

    ollama.mode = "html"  # the new summary cannot be had: the stale one goes, the heuristic one is read
    stale = service.update_insight(ctx, made["id"], Update(content=LONG + " More."))
    assert stale["insight"]["summary_source"] == "heuristic" and stale["summary_fallback"] == "bad_reply"
    assert "summary" not in meta_of(ctx, made["path"]) and "summary_source" not in meta_of(ctx, made["path"])

    ollama.mode = "ok"
    mine = service.update_insight(ctx, made["id"], Update(summary="My own words."))
    asked = len(ollama.generated())
    service.update_insight(ctx, made["id"], Update(content=OTHER + " Again."))
    assert len(ollama.generated()) == asked  # a person's summary: nothing to ask
    meta = meta_of(ctx, made["path"])
    assert meta["summary"] == "My own words." and "summary_source" not in meta and mine["insight"]["summary_source"] == "human"


# --------------------------------------------------------------------------- sessions


def test_a_handoff_gives_the_session_a_generated_headline_unless_a_person_wrote_one(tmp_path: Path, ollama: FakeOllama) -> None:
    ctx = workspace(tmp_path, ollama.url)
    service.orient(ctx, task="rebuilds")
    ended = service.handoff(ctx, Handoff(summary=LONG, completed=("swap",)))
    session = ended["session"]
    assert (session["headline"], session["headline_source"], ended["headline_fallback"]) == ("The search index is rebuilt into, in short.", "ai", None)
    path = session["path"]
    assert meta_of(ctx, path)["headline_source"] == "ai"
    assert search.scan(ctx, "kind:session rebuilds")["matches"][0]["summary"] == "The search index is rebuilt into, in short."
    again = service.handoff(ctx, Handoff(summary=LONG, completed=("swap",)), session_id=session["id"])
    assert again["changed"] is False and len(ollama.generated()) == 1

    text = (ctx.root / path).read_text()
    (ctx.root / path).write_text(text.replace("headline: The search index is rebuilt into, in short.\nheadline_source: ai\n", "headline: Swap by rename.\n"))
    kept = service.handoff(ctx, Handoff(summary=OTHER), session_id=session["id"])
    assert kept["session"]["headline"] == "Swap by rename." and kept["session"]["headline_source"] == "human"
    assert len(ollama.generated()) == 1


def test_a_handoff_with_the_server_down_keeps_the_heuristic_headline(tmp_path: Path) -> None:
    ctx = workspace(tmp_path, f"http://127.0.0.1:{free_port()}")
    ended = service.handoff(ctx, Handoff(summary=LONG))
    assert (ended["session"]["headline_source"], ended["headline_fallback"]) == ("heuristic", "unreachable")
    assert "headline" not in meta_of(ctx, ended["session"]["path"])


# --------------------------------------------------------------------------- moss index rebuild --summaries ai


def artifact_digests(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in root.rglob("*")
        if path.is_file() and ".moss/cache" not in path.as_posix() and ".git/" not in path.as_posix()
    }


def test_rebuild_with_ai_summaries_writes_the_index_only(tmp_path: Path, ollama: FakeOllama) -> None:
    ctx = workspace(tmp_path, ollama.url, enabled=False)  # written without AI: heuristic summaries
    plain = service.remember(ctx, LONG)["id"]
    mine = service.remember(ctx, OTHER, summary="Writes are atomic.")["id"]
    short = service.remember(ctx, "Locks have deadlines.")["id"]
    service.handoff(ctx, Handoff(summary=OTHER))
    before = artifact_digests(ctx.root)

    done = search.index_rebuild(ctx, summaries="ai")
    assert done["rebuilt"] is True
    assert done["summaries"] == {
        "method": "ai",
        "model": "phi3",
        "endpoint": ollama.url,
        "items": 4,
        "ai": 2,
        "kept": 1,
        "heuristic": 1,
        "reasons": {"short": 1},
    }
    assert artifact_digests(ctx.root) == before  # the cache alone changed
    shown = {hit["id"]: hit["summary"] for hit in search.scan(ctx, "kind:insight", limit=10)["matches"]}
    assert shown == {plain: "The search index is rebuilt into, in short.", mine: "Writes are atomic.", short: "Locks have deadlines."}
    assert search.scan(ctx, "kind:session")["matches"][0]["summary"] == "Every write of an artifact file, in short."

    (ctx.root / ".moss" / "insights" / f"{plain}.md").write_text((ctx.root / ".moss" / "insights" / f"{plain}.md").read_text() + "Edited.\n")
    refreshed = {hit["id"]: hit["summary"] for hit in search.scan(ctx, "kind:insight", limit=10)["matches"]}
    assert refreshed[plain].startswith("The search index is rebuilt into a temporary file")  # changed: read anew
    assert search.scan(ctx, "kind:session")["matches"][0]["summary"] == "Every write of an artifact file, in short."  # unchanged: kept

    search.index_rebuild(ctx)  # a rebuild without them: heuristic again
    assert search.scan(ctx, "kind:session")["matches"][0]["summary"].startswith("Every write of an artifact file goes through")


@pytest.mark.parametrize("down", ["unreachable", "timeout"])
def test_rebuild_with_ai_summaries_and_the_server_away_reports_why(tmp_path: Path, ollama: FakeOllama, down: str) -> None:
    endpoint = ollama.url if down == "timeout" else f"http://127.0.0.1:{free_port()}"
    ollama.mode = "slow"
    ctx = workspace(tmp_path, endpoint)
    ctx = ctx.replace(config=config.Config())  # written without AI
    for text in (LONG, OTHER, LONG + " Third."):
        service.remember(ctx, text)
    ctx = ctx.replace(config=config.load_config(ctx.root))
    done = within_deadline(lambda: search.index_rebuild(ctx, summaries="ai"))
    assert (done["summaries"]["ai"], done["summaries"]["heuristic"], done["summaries"]["reasons"]) == (0, 3, {down: 3})
    assert len(ollama.generated()) == (1 if down == "timeout" else 0)  # away once: not asked again for the others


def test_the_rebuild_and_add_commands_with_a_local_server(tmp_path: Path, ollama: FakeOllama) -> None:
    ctx = workspace(tmp_path, ollama.url)
    added = run_cli("moss", "insight", "add", LONG, "--json", cwd=ctx.root)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["summary_source"] == "ai"
    rebuilt = run_cli("moss", "index", "rebuild", "--summaries", "ai", cwd=ctx.root)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.splitlines()[1] == "summaries: 0 from phi3, 0 heuristic, 1 kept as written"
    wrong = run_cli("moss", "index", "rebuild", "--summaries", "magic", "--json", cwd=ctx.root)
    assert wrong.returncode == 2 and json.loads(wrong.stderr)["error"]["code"] == "INVALID_REQUEST"


# --------------------------------------------------------------------------- settings and replies


def test_settings_are_checked_and_an_endpoint_off_this_machine_must_be_allowed() -> None:
    assert ai.read_settings({}) == ai.AiSettings()
    spec = ai.read_settings({"summaries": {"enableAi": True, "ollamaEndpoint": "http://127.0.0.1:11434/", "ollamaModel": "llama3.2:3b", "aiThreshold": 50}})
    assert (spec.enabled, spec.endpoint, spec.model, spec.threshold) == (True, "http://127.0.0.1:11434", "llama3.2:3b", 50)
    remote = {"summaries": {"ai": True, "ollama_endpoint": "http://gpu-box.example:11434"}}
    for bad in (
        remote,
        {"summaries": {"ai": "yes"}},
        {"summaries": {"ollama_endpoint": "ftp://localhost"}},
        {"summaries": {"ollama_endpoint": "http://user@localhost:11434"}},
        {"summaries": {"ollama_model": "phi3; rm -rf"}},
        {"summaries": {"timeout_seconds": 0}},
        {"summaries": {"timeout_seconds": 600}},
        {"summaries": {"ai_threshold": -1}},
        {"summaries": {"ai": True, "enableAi": False}},
        {"summaries": "on"},
    ):
        with pytest.raises(InvalidDocument) as caught:
            ai.read_settings(bad)
        assert caught.value.code == "SCHEMA_ERROR", bad
    allowed = ai.read_settings({"summaries": {**remote["summaries"], "allow_remote": True}})
    assert allowed.endpoint == "http://gpu-box.example:11434"
    off = ai.read_settings({"summaries": {**remote["summaries"], "ai": False}})  # nothing is sent anywhere: no refusal
    with pytest.raises(InvalidDocument):
        ai.check_endpoint(replace(off, enabled=True))  # as `--summaries ai` and the client check it


def test_a_rebuild_asked_for_ai_summaries_refuses_an_endpoint_off_this_machine(tmp_path: Path) -> None:
    ctx = workspace(tmp_path, "http://gpu-box.example:11434", enabled=False)
    service.remember(ctx, LONG)
    with pytest.raises(InvalidDocument) as caught:
        search.index_rebuild(ctx, summaries="ai")
    assert caught.value.code == "SCHEMA_ERROR"


@pytest.mark.parametrize(
    ("response", "line"),
    [
        ("Summary: Locks have deadlines.", "Locks have deadlines."),
        ('"Locks have deadlines."\n\nLet me know if you need more.', "Locks have deadlines."),
        ("\n\n## Here is a one-line summary: **Locks** time out", "Locks time out"),
        ("> See [the docs](http://x) for `locks`", "See the docs for locks"),
        ("- Writes go through a temporary file", "Writes go through a temporary file"),
        ("x" * 300, "x" * 99 + "…"),
        ("   ", None),
        ("...", None),
        ("bad\x07bell", None),
    ],
)
def test_a_response_becomes_one_line_or_nothing(response: str, line: str | None) -> None:
    assert ai.clean_summary(response) == line


def test_a_reply_must_be_ollamas_json_with_a_complete_response() -> None:
    assert ai.read_reply({"model": "phi3", "response": "Locks time out.", "done": True}) == "Locks time out."
    for bad in ([], {"error": "model not found"}, {"done": True}, {"response": 3}, {"response": "x y z", "done": False}, {"response": "", "done": True}):
        with pytest.raises(ValueError):
            ai.read_reply(bad)
