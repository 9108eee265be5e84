"""`rlvr serve --env ID`: an environment served over HTTP and WebSocket as an OpenEnv environment.

Trainers in other processes or languages play its episodes: OpenEnv's clients (openenv-core 0.3.0's `EnvClient`,
`GenericEnvClient`, and those built on them) connect unchanged to the printed address, and
`rlvr.envs.remote.client.RemoteEnv(URL)` makes it a Gymnasium environment again. Each WebSocket connection is a
session with its own copy of the environment (--max-sessions at once); the action is `{"completion": TEXT}`, the
observation the environment's messages, reward, terminated, truncated and info (its verdict). A bad request gets a
4xx and one line, and the server goes on.

It listens on 127.0.0.1 (this machine only) unless --host says otherwise (0.0.0.0: every interface; anyone who can
reach it can use it, with no authentication), on --port (8000; 0: a free port, printed). Ctrl-C stops it.
Needs the `serve` extra (pip install 'rlvr[serve]').
"""

from __future__ import annotations

import argparse
import signal

from rlvr.env_loading import add_env_options

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000  # OpenEnv's own servers' port


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve an environment to other processes over HTTP (an OpenEnv environment)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_env_options(p)
    p.add_argument("--host", default=DEFAULT_HOST, help=f"the address to listen on ({DEFAULT_HOST}: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port ({DEFAULT_PORT}; 0: a free one, printed)")
    p.add_argument("--max-sessions", type=int, default=None, metavar="N", help="WebSocket sessions at once (64)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Serves until Ctrl-C, then 0; a bad input or a missing extra is an `RlvrError`, one line from rlvr.cli."""
    from rlvr.env_loading import make_env
    from rlvr.envs import parse_env_args
    from rlvr.envs.remote.openenv_types import require_openenv
    from rlvr.envs.remote.server import MAX_SESSIONS, bind, build_app, serve_forever, url_of
    from rlvr.envs.remote.session import ServedEnv, check_servable
    from rlvr.envs.remote.wire import OPENENV_VERSION
    from rlvr.usage import UsageError

    require_openenv("rlvr serve")  # before any environment is made: the extra is the likelier miss
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if args.max_sessions is not None and args.max_sessions < 1:
        raise UsageError(f"--max-sessions must be at least 1, got {args.max_sessions}")
    env_args = parse_env_args(args.env_arg)
    probe = make_env(args.env, env_args)  # a bad id or argument: one line now, not at the first client
    try:
        inner = check_servable(probe, args.env)
        kind, version = inner.kind, inner.version
    finally:
        probe.close()
    app = build_app(ServedEnv(args.env, env_args), args.max_sessions or MAX_SESSIONS)
    sock = bind(args.host, args.port)
    url = url_of(sock)
    line = (
        f"serving {args.env} (v{version}, {kind}) at {url} as an OpenEnv {OPENENV_VERSION} environment: "
        f"WebSocket {url.replace('http', 'ws', 1)}/ws, HTTP /reset /step /state /health /schema; Ctrl-C stops"
    )
    # uvicorn shuts down on SIGINT and SIGTERM (sessions closed), then passes the signal on to the handler it found:
    # SIGTERM (a service manager's stop) ends like Ctrl-C, in "stopped" and 0.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        serve_forever(app, sock, ready=lambda: print(line, flush=True))
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
    print("stopped", flush=True)
    return 0
