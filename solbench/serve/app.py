"""The HTTP service (FastAPI): the versioned JSON API under ``/v1`` and the web pages.

Writes need a bearer token (``solbench serve token add``); reads (leaderboards, submissions, their
records and logs) are public. Every refusal is a 4xx whose JSON body is ``{"error": "<one line>"}``;
an unexpected fault is a bare 500 with no traceback. Bodies are capped before they are read, and
names that reach a file name or a page (candidate files, problem ids, workloads, uploaded files)
must be plain names. Candidate code is only written to the job folders, never imported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from solbench._version import __version__
from solbench.errors import SolbenchError
from solbench.present import one_line
from solbench.serve import pages
from solbench.serve.store import FINAL_STATES, QuotaError, Store, Token
from solbench.settings import SSE_POLL_S

API_VERSION = "v1"
CANDIDATE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\.(py|cu)$")
PROBLEM_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
WORKLOAD_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=,-]{0,127}$")
UPLOAD_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.(py|yaml|yml|json|txt|md|cu|cuh|h)$")
MAX_UPLOAD_FILES = 16
MAX_ID = 2**31 - 1


@dataclass
class Limits:
    max_source_bytes: int = 256 * 1024
    """One candidate source, and one file of an uploaded problem folder."""
    max_body_bytes: int = 2 * 1024 * 1024
    """A request body, whatever it holds."""
    allow_uploads: bool = False
    """Whether a submission may bring its own problem folder (its reference runs unsandboxed in the job)."""
    problems_dir: str | None = None


@dataclass
class Service:
    store: Store
    limits: Limits
    library: dict[str, Any] = field(default_factory=dict)  # problem name -> Problem


class SubmissionIn(BaseModel):
    """A candidate to score: its file name and source, and the problems (library ids) to score it on,
    or an uploaded problem folder (``problem_files``: file name -> text) when the server allows it."""

    model_config = ConfigDict(extra="forbid")
    filename: str = Field(max_length=80, description="the candidate's file name: NAME.py or NAME.cu")
    source: str = Field(description="the candidate's source text")
    problems: list[str] = Field(default_factory=list, max_length=32, description="library problem ids")
    workloads: list[str] = Field(default_factory=list, max_length=64, description="only these workloads")
    small: bool = Field(False, description="one small workload per problem (its test_axes), as `run --small`")
    problem_files: dict[str, str] | None = Field(None, description="an uploaded problem folder")


class SubmissionOut(BaseModel):
    id: int
    state: str
    url: str


class Refused(HTTPException):
    """A 4xx with one line of reason."""

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None):
        super().__init__(status, one_line(reason, 300), headers)


class _TooLarge(Refused):
    def __init__(self, limit: int):
        super().__init__(413, f"request body over {limit} bytes (the server's --max-body): send less")


class BodyLimit:
    """ASGI middleware: a body longer than the limit is refused (413) before or while it is read."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.limit:
            reason = "bad Content-Length" if not length.isdigit() else f"request body over {self.limit} bytes"
            await _send_error(send, 413 if length.isdigit() else 400, reason)
            return
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge(self.limit)
            return message

        await self.app(scope, limited, send)


async def _send_error(send: Any, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(reason, 300)}, status_code=status, headers=headers)


def _validation_line(err: RequestValidationError) -> str:
    """The first problem pydantic found, as one line: where and what."""
    first = (err.errors() or [{}])[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    what = first.get("msg", "invalid request")
    if first.get("type") == "json_invalid":
        return "the body is not valid JSON"
    return f"{where}: {what}"


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_line(exc))

    @app.exception_handler(Exception)
    async def fault(request: Request, exc: Exception) -> JSONResponse:  # logged by uvicorn; never sent
        return JSONResponse({"error": "internal error"}, status_code=500)


def _bearer(request: Request) -> Token:
    service: Service = request.app.state.service
    header = request.headers.get("authorization", "")
    scheme, _, raw = header.partition(" ")
    challenge = {"WWW-Authenticate": "Bearer"}
    if scheme.lower() != "bearer" or not raw.strip():
        raise Refused(401, "no token: send 'Authorization: Bearer TOKEN' (make one with `solbench serve token add`)",
                      challenge)
    raw = raw.strip()
    token = service.store.token(raw) if len(raw) <= 200 and raw.isascii() else None
    if token is None:
        raise Refused(401, "unknown or revoked token", challenge)
    return token


def _check_problems(service: Service, body: SubmissionIn) -> tuple[list[str], dict[str, str] | None]:
    """The problem ids to score on (library ids, checked) or the uploaded folder (checked, loaded)."""
    if body.problem_files is not None:
        if body.problems:
            raise Refused(422, "give problems (library ids) or problem_files (an uploaded folder), not both")
        return _check_upload(service, body), body.problem_files
    if not body.problems:
        raise Refused(422, "problems: give at least one library problem id (GET /v1/problems lists them)")
    for p in body.problems:
        if not PROBLEM_ID.match(p):
            raise Refused(422, f"problems: {p[:80]!r} is not a problem id (letters, digits, '_', '.', '-')")
        if p not in service.library:
            from solbench.errors import did_you_mean

            raise Refused(404, f"no problem {p!r} in this server's library{did_you_mean(p, service.library)}")
    _check_workloads(body.workloads, [service.library[p] for p in body.problems], body.small)
    return list(dict.fromkeys(body.problems)), None


def _check_upload(service: Service, body: SubmissionIn) -> list[str]:
    files = body.problem_files or {}
    if not service.limits.allow_uploads:
        raise Refused(403, "this server scores library problems only (uploads need `solbench serve --allow-uploads`)")
    if "problem.yaml" not in files or len(files) > MAX_UPLOAD_FILES:
        raise Refused(422, f"problem_files: a problem folder holds problem.yaml and at most {MAX_UPLOAD_FILES} files")
    for name, text in files.items():
        if not UPLOAD_NAME.match(name):
            raise Refused(422, f"problem_files: {name[:80]!r} is not a plain file name")
        if len(text.encode("utf-8", "replace")) > service.limits.max_source_bytes:
            raise Refused(413, f"problem_files: {name} is over {service.limits.max_source_bytes} bytes")
    problem = _load_uploaded(files)
    _check_workloads(body.workloads, [problem], body.small)
    return [problem.name]


def _load_uploaded(files: dict[str, str]) -> Any:
    """The uploaded problem, read from its YAML (the other files are written beside it, never imported)."""
    import tempfile

    from solbench.data import load_problem

    with tempfile.TemporaryDirectory(prefix="solbench-upload-") as tmp:
        for name, text in files.items():  # plain names, checked by the caller
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        try:
            return load_problem(Path(tmp) / "problem.yaml")
        except (SolbenchError, ValueError, RecursionError) as err:
            raise Refused(422, f"problem_files: problem.yaml does not load: {err}") from None


def _check_workloads(workloads: list[str], problems: list[Any], small: bool) -> None:
    known = {"small"} if small else {w.name for p in problems for w in p.workloads}
    for w in workloads:
        if not WORKLOAD_NAME.match(w) or w not in known:
            raise Refused(422, f"workloads: no workload {w[:80]!r} in the given problems (known: "
                          f"{', '.join(sorted(known)[:12])})")


def _check_source(service: Service, body: SubmissionIn) -> str:
    if not CANDIDATE_NAME.match(body.filename):
        raise Refused(422, "filename: give NAME.py or NAME.cu, NAME of letters, digits and '_' (at most 64)")
    if len(body.source.encode("utf-8", "replace")) > service.limits.max_source_bytes:
        raise Refused(413, f"source over {service.limits.max_source_bytes} bytes (the server's --max-source)")
    if not body.source.strip():
        raise Refused(422, "source: empty")
    return body.filename


def _submission(service: Service, sub_id: int, after: int = 0) -> dict[str, Any]:
    sub = service.store.submission(sub_id)
    if sub is None:
        raise Refused(404, f"no submission {sub_id}")
    sub["records"] = service.store.records(sub_id, after=after)
    return sub


def _sse(event: str, data: Any, ident: int | None = None) -> str:
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n"


def library_by_name(problems_dir: str | None) -> dict[str, Any]:
    """Every problem of the library that loads, by name (read once: the library is files, not users')."""
    from solbench.data import find_problems, load_problem, problems_root

    root = problems_root(problems_dir)
    out = {}
    for f in find_problems(root) if root.is_dir() else []:
        try:
            p = load_problem(f)
        except SolbenchError:
            continue
        out.setdefault(p.name, p)
    return out


def create_app(store: Store, limits: Limits | None = None, scorer: Any = None) -> FastAPI:
    """The service's ASGI application over ``store``; ``scorer`` (start/stop) runs while it is up, and
    is stopped inside the server's graceful shutdown (uvicorn re-raises SIGTERM once that is done)."""
    limits = limits or Limits()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        if scorer is not None:
            scorer.start()
        try:
            yield
        finally:
            if scorer is not None:
                await run_in_threadpool(scorer.stop)

    app = FastAPI(title="solbench serve", version=__version__, docs_url=None, redoc_url=None, lifespan=lifespan,
                  description="Score GPU kernels against the hardware's speed of light: submit a candidate, follow "
                              "its records, read the leaderboards.")
    app.state.service = Service(store, limits, library_by_name(limits.problems_dir))
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    _install_errors(app)
    _api_routes(app)
    _page_routes(app)
    return app


def _service(request: Request) -> Service:
    return request.app.state.service


SubId = PathParam(ge=1, le=MAX_ID, description="the submission's id")


def _api_routes(app: FastAPI) -> None:
    @app.post(f"/{API_VERSION}/submissions", status_code=201, response_model=SubmissionOut,
              responses={401: {"description": "no or bad token"}, 413: {"description": "too large"},
                         422: {"description": "bad field"}, 429: {"description": "quota used up"}})
    def submit(body: SubmissionIn, token: Token = Depends(_bearer), service: Service = Depends(_service)) -> Any:
        """Queue a candidate; returns its id. Scored in order of arrival."""
        filename = _check_source(service, body)
        problems, uploaded = _check_problems(service, body)
        try:
            sub_id = service.store.submit(token, filename, body.source, problems, body.workloads, body.small, uploaded)
        except QuotaError as err:
            raise Refused(429, str(err)) from None
        return {"id": sub_id, "state": "queued", "url": f"/{API_VERSION}/submissions/{sub_id}"}

    @app.get(f"/{API_VERSION}/submissions/{{sub_id}}")
    def submission(sub_id: int = SubId, after: int = Query(0, ge=0, le=2**62, description="records after this row"),
                   service: Service = Depends(_service)) -> dict[str, Any]:
        """A submission's state, progress and records (each with its row number ``_row``)."""
        return _submission(service, sub_id, after)

    @app.get(f"/{API_VERSION}/submissions/{{sub_id}}/events", response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}})
    async def events(sub_id: int = SubId, service: Service = Depends(_service)) -> StreamingResponse:
        """Server-sent events: ``record`` per new record, ``progress``, and ``state`` (the last, once final)."""
        await run_in_threadpool(_submission, service, sub_id, 2**62)  # 404 before the stream starts
        return StreamingResponse(_event_stream(service, sub_id), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    @app.get(f"/{API_VERSION}/problems")
    def problems(service: Service = Depends(_service)) -> list[dict[str, Any]]:
        """The library problems a submission may name."""
        return [{"name": p.name, "description": p.description, "tags": list(p.tags),
                 "workloads": [w.name for w in p.workloads]} for p in service.library.values()]

    @app.get(f"/{API_VERSION}/leaderboard/{{problem}}")
    def leaderboard(problem: str = PathParam(max_length=128), gpu: str | None = Query(None, max_length=64),
                    service: Service = Depends(_service)) -> dict[str, Any]:
        """Candidates (one per submission) ranked per GPU with their gap to the best library baseline
        (``best_known_sol``, ``gap_to_best_known``), and the best result per workload."""
        _known_problem(service, problem)
        return pages.leaderboard_data(service.store.records(problem=problem, library_only=True), problem, gpu)[1]


def _known_problem(service: Service, problem: str) -> None:
    if not PROBLEM_ID.match(problem) or problem not in service.library:
        raise Refused(404, f"no problem {problem[:80]!r} in this server's library")


async def _event_stream(service: Service, sub_id: int) -> Any:
    last, progress, beats = 0, None, 0
    while True:
        sub = await run_in_threadpool(_submission, service, sub_id, last)
        for r in sub["records"]:
            last = r["_row"]
            yield _sse("record", {k: r.get(k) for k in ("problem", "workload", "solution", "status", "time_s", "sol",
                                                        "reason")}, last)
        if sub.get("progress") != progress:
            progress = sub.get("progress")
            yield _sse("progress", progress)
        if sub["state"] in FINAL_STATES:
            yield _sse("state", {"state": sub["state"], "error": sub.get("error")})
            return
        beats += 1
        if beats % 30 == 0:
            yield ": still waiting\n\n"  # a comment: keeps proxies from closing an idle stream
        await asyncio.sleep(SSE_POLL_S)


def _page_routes(app: FastAPI) -> None:
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(service: Service = Depends(_service)) -> str:
        return pages.index_page(service.store.scored_problems(), service.store.submissions())

    @app.get("/leaderboard/{problem}", response_class=HTMLResponse, include_in_schema=False)
    def leaderboard_page(problem: str = PathParam(max_length=128), gpu: str | None = Query(None, max_length=64),
                         service: Service = Depends(_service)) -> str:
        _known_problem(service, problem)
        return pages.leaderboard_page(service.store.records(problem=problem, library_only=True), problem, gpu or None)

    @app.get("/submissions/{sub_id}", response_class=HTMLResponse, include_in_schema=False)
    def submission_page(sub_id: int = SubId, service: Service = Depends(_service)) -> str:
        sub = _submission(service, sub_id)
        return pages.submission_page(sub, sub.pop("records"))
