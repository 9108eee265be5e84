"""An rlvr environment as an OpenEnv server (`rlvr serve`): openenv-core 0.3.0's routes, types and sessions.

OpenEnv's `HTTPEnvServer` (its `create_fastapi_app`) does the serving; rlvr gives it an `Environment` whose reset
and step are an `EnvSession`'s, so OpenEnv's own clients (`EnvClient`, `GenericEnvClient`, `SyncEnvClient`, and
those built on them) connect unchanged:
- `/ws`, a WebSocket: one session per connection, each with its own copy of the environment (up to
  `max_sessions` at once), its messages `{"type": "reset", "data": {"seed": 3}}`, `{"type": "step", "data":
  {"completion": TEXT}}`, `{"type": "state"}`, `{"type": "close"}`. Episodes are played here;
- `POST /reset`, `POST /step`, `GET /state`: plain HTTP, where OpenEnv makes a fresh environment for each request:
  `/reset` gives a task's prompt, `/step` answers 409 (no episode runs in a fresh environment);
- `GET /health`, `/schema`, `/metadata` (the environment's id and version), and FastAPI's `/docs`.
A bad request is a 4xx whose JSON is `{"detail": ONE LINE}` (over the WebSocket: an error message with that line,
and the session goes on). OpenEnv's web UI (gradio) is never started.
"""

from __future__ import annotations

import errno
import functools
import socket
import threading
from collections.abc import Callable
from typing import Any

from rlvr.envs.remote.openenv_types import openenv_types
from rlvr.envs.remote.session import EnvSession, ServedEnv
from rlvr.envs.remote.wire import OPENENV_VERSION, RequestError, ServeError, Turn, one_line

MAX_SESSIONS = 64  # WebSocket sessions at once, each its own environment: a GRPO batch of episodes in flight


@functools.cache
def environment_class() -> type:
    """OpenEnv's `Environment` over an `EnvSession` (made when first asked for: OpenEnv is imported then)."""
    types = openenv_types()  # the extra's check, and OpenEnv's types
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import EnvironmentMetadata

    def observation(turn: Turn) -> Any:
        return types.observation(
            messages=turn.messages,
            reward=turn.reward,
            done=turn.done,
            terminated=turn.terminated,
            truncated=turn.truncated,
            info=turn.info,
        )

    class RlvrEnvironment(Environment):
        # Each session (WebSocket connection) gets its own instance, hence its own environment: nothing is shared.
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, served: ServedEnv):
            super().__init__()
            self.session = EnvSession(served)

        def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> Any:
            return observation(self.session.reset(seed=seed, episode_id=episode_id, **kwargs))

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            return observation(self.session.step(action.completion))

        @property
        def state(self) -> Any:
            return types.state(**self.session.state())

        def get_metadata(self) -> Any:
            served, inner = self.session.served, self.session.inner
            return EnvironmentMetadata(
                name=served.env_id,
                description=f"rlvr {inner.kind} environment {served.env_id} (OpenEnv {OPENENV_VERSION} protocol): "
                'act with {"completion": TEXT}; observe messages, reward, terminated, truncated, info',
                version=str(inner.version),
            )

        def close(self) -> None:
            self.session.close()

    return RlvrEnvironment


def build_app(served: ServedEnv, max_sessions: int = MAX_SESSIONS) -> Any:
    """OpenEnv's FastAPI app serving `served`, its errors answered in one line."""
    types = openenv_types()  # the extra's check, and OpenEnv's types
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from openenv.core.env_server.http_server import create_fastapi_app
    from starlette.exceptions import HTTPException

    factory = functools.partial(environment_class(), served)
    app = create_fastapi_app(factory, types.action, types.observation, max_concurrent_envs=max_sessions)

    def answer(status: int, detail: Any, headers: Any = None) -> JSONResponse:
        return JSONResponse({"detail": describe(detail)}, status_code=status, headers=headers)

    async def refused(request: Any, exc: RequestError) -> JSONResponse:
        return answer(exc.status, str(exc))

    async def invalid(request: Any, exc: RequestValidationError) -> JSONResponse:
        return answer(422, exc.errors())

    async def http_error(request: Any, exc: HTTPException) -> JSONResponse:  # OpenEnv's own 422s carry error lists
        return answer(exc.status_code, exc.detail, getattr(exc, "headers", None))

    app.add_exception_handler(RequestError, refused)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_middleware(QuietDisconnects)
    return app


class QuietDisconnects:
    """ASGI middleware: a WebSocket whose client closed first ends quietly. OpenEnv 0.3.0's `/ws` handler closes the
    socket after the client's `close` message and catches only RuntimeError there, so the WebSocketDisconnect that
    Starlette raises when the client is already gone (OpenEnv's own client closes at once) would print a traceback
    at every disconnect."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            pass


def describe(detail: Any) -> str:
    """A 4xx's detail as one line: pydantic's error lists as `where: what (why)`, joined by `; `."""
    if isinstance(detail, (list, tuple)):
        parts = []
        for error in detail:
            if isinstance(error, dict):
                where = ".".join(str(p) for p in error.get("loc", ()))
                why = (error.get("ctx") or {}).get("error")
                parts.append(f"{where}: {error.get('msg', error)}" + (f" ({why})" if why else ""))
            else:
                parts.append(str(error))
        detail = "; ".join(parts)
    return one_line(str(detail))


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (port 0: a free one), or `ServeError` in one line."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ServeError(f"cannot listen on {host!r}: {getattr(exc, 'strerror', None) or exc}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)  # connections wait in the backlog until uvicorn accepts: listening from here on
    except OSError as exc:
        sock.close()
        taken = exc.errno == errno.EADDRINUSE
        hint = ": another program holds it (--port N, or --port 0 for a free one)" if taken else ""
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def uvicorn_server(app: Any) -> Any:
    import uvicorn

    # Quiet: no access log, no start-up lines (the caller prints where it listens); errors still show.
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))


def serve_forever(app: Any, sock: socket.socket, ready: Callable[[], None] | None = None) -> None:
    """Serve `app` on `sock` in this thread until Ctrl-C or SIGTERM (uvicorn's shutdown: sessions closed), calling
    `ready()` once uvicorn has started, its signal handlers in place: a Ctrl-C from then on is a clean stop."""
    if ready is not None:

        async def started() -> None:
            ready()

        app.router.on_startup.append(started)
    uvicorn_server(app).run(sockets=[sock])


class ServerThread:
    """`app` served from a thread of this process (tests, notebooks): `url` at once, `close()` to stop."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.server = uvicorn_server(app)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name="rlvr-serve", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
