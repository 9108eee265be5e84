"""rlvr's environments in other processes: served as OpenEnv environments (`rlvr serve`), played through OpenEnv's
clients, and made Gymnasium environments again (`RemoteEnv`). rlvr follows openenv-core 0.3.0's protocol.

- `wire`: what crosses: a `Turn` (messages, reward, terminated, truncated, info) as plain JSON, and the errors;
- `session`: `EnvSession`, one client's copy of the environment, its requests checked (`ServedEnv`: which one);
- `openenv_types`: OpenEnv's `Action` (`{"completion": TEXT}`), `Observation` and `State` for rlvr's environments;
- `server`: OpenEnv's `Environment` over a session and its FastAPI app, each 4xx in one line (`build_app`), and
  the listening socket (`bind`: 127.0.0.1 unless told otherwise);
- `client`: `RemoteEnv`, a served environment through OpenEnv's `GenericEnvClient`.

Importing this package imports `RemoteEnv`'s module only, and that none of OpenEnv, FastAPI or uvicorn: they are the
`serve` extra's, imported when a server or a client is made (without them, one line names the extra)."""

from rlvr.envs.remote.client import RemoteEnv

__all__ = ["RemoteEnv"]
