"""The agent gateway: an OpenAI-compatible HTTP server, served by a sampler, that records every call.

Where it lives, and why. The gateway is a consumer of the `Sampler` protocol (`envs.sampler`), as
`envs.rollout` is: it turns requests into prompt ids with the chat template (`envs.chat_template`),
asks the sampler for completions (`envs.agent.engine`), and records what was served (`envs.agent.calls.Call`).
It needs no trainer code and no torch: the trainer hands it the sampler it trains with (its
`LocalSampler`, a vLLM or HF backend), as it hands one to the rollout, so the arrows stay
trainers -> envs. fastapi and uvicorn are imported only when a gateway is built.

How an agent becomes an environment: `envs.agent.env.AgentEnv` (`rlvr/Agent-v0`), whose episodes
`envs.rollout` hands to the env itself; it serves the rollout's own sampler here (a trainer's
`LocalSampler`, which loads staged weights between engine calls: `--max-staleness K` works, and
each call records the version it got; a Ray rollout worker serves a gateway of its own beside its
sampler) and plays the agents (`envs.agent.play`). Later segments of an episode (a rewritten
history) are `Episode`s of the same group with `segment` >= 1, which statistics and advantages
count once per episode. Rejected: making the env a proxy that the rollout's turn loop samples for
(reset returns the agent's first call's messages, step hands back the text): it keeps the rollout
unchanged, but loses each call's own settings (`n`, `max_tokens`, `stop`, `tools`), cannot express a
rewritten history, and needs every agent to open each group's copies with identical messages.

The server. `AgentGateway(sampler, tokenizer).start()` serves on 127.0.0.1, a free port, in a
thread of its own (uvicorn), with fastapi. Each episode has its own route: `open_episode()` returns an id, and
`base_url(id)` = `http://127.0.0.1:PORT/episodes/ID/v1`, the `openai` client's `base_url`: calls of
concurrent episodes never mix, and a call to an unknown or closed episode is a 404. Routes:
- `POST .../v1/chat/completions`: `messages` (and `tools`, passed to the chat template) -> prompt
  ids; `n`, `temperature`, `top_p`, `max_tokens` (or `max_completion_tokens`), `stop`, `seed`.
  The answer's `message.content` is the completion decoded without special tokens, cut before a
  stop string (OpenAI's convention).
- `POST .../v1/completions`: `prompt`, a string (tokenized without special tokens) or a list of
  token ids (taken as they are); the same settings.
- `GET .../v1/models`: the one model, `model_name` (any `model` a request names is accepted).
`stream: true` gets the whole answer as server-sent events once it is sampled (the OpenAI chunk
format, `envs.agent.responses`), so clients that stream work; tokens are not sent as they are
sampled. With `tools`, the completion's tool calls are read into `message.tool_calls`
(`envs.agent.responses`; the model family's format is `tool_format`, Hermes by default). `logprobs`
in the answer are not served.

Prompt ids, token-exact. A chat call whose messages are an earlier call's messages, then that
call's answer as an assistant message (its content and tool calls unchanged), then new messages, with
the same tools, gets that call's prompt ids + completion ids + the template's tokens for the new
messages (`envs.chat_template.reply_ids`: the end of the model's turn when it did not emit eos, the
new messages, the generation prompt), exactly as `envs.rollout` builds a multi-turn episode; the
model's text is never re-tokenized. So a call that continues a conversation extends its prompt
ids by construction, and the recording rule joins them. Any other call (the first, a rewritten
history, a template without the prefix property) is rendered whole by the chat template.

Settings a request leaves out are the gateway's `defaults` (a rollout's: the run's temperature,
top_p and max_tokens). With a default seed, a call that names none is seeded
`seed + slot + k * TURN_SEED_STRIDE`, for call k of the episode opened with `slot` (its index in
the rollout), as `envs.rollout` seeds turn k of an episode: a rollout's calls are reproducible
whatever order the agents' calls come in, on an engine that seeds per request.

The engine: one driver thread is the sampler's only caller (`envs.agent.engine`); concurrent
calls share its batches (vLLM's continuous batching, or one `generate` per gathered batch). A
sampler that fails fails every waiting call (503) and is kept in `engine_failure`.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.agent.calls import Call
from rlvr.envs.agent.engine import EngineClosedError, EngineDriver
from rlvr.envs.agent.responses import response, same_tool_calls, split_tool_calls, stream_events
from rlvr.envs.chat_template import TemplateError, reply_ids, template_ids
from rlvr.envs.core import EnvError
from rlvr.envs.rollout.sampler_calls import TURN_SEED_STRIDE
from rlvr.envs.sampler import Sample, Sampler, SamplingSettings, Tokenizer
from rlvr.envs.tools import ToolCallParser, get_parser

DEFAULT_MAX_TOKENS = 256  # OpenAI's endpoints leave it to the server: this one's default
START_TIMEOUT_S = 30.0


class GatewayError(EnvError, RuntimeError):
    """The gateway could not start, or an episode id is unknown."""


def _web() -> tuple[Any, Any]:
    """fastapi and uvicorn, checked with the `openai` client the agents are given (envs.agent.play):
    the `agent` extra, which only rlvr/Agent-v0 needs."""
    try:
        import fastapi
        import fastapi.responses
        import openai  # noqa: F401 - imported by each episode; missing, said here, before any episode
        import uvicorn
    except ImportError as exc:
        raise GatewayError(
            f"rlvr/Agent-v0's gateway needs the `agent` extra ({exc.name} is missing): pip install 'rlvr[agent]'"
        ) from None
    return fastapi, uvicorn


class _BadRequest(Exception):
    """A request the gateway answers with 400 (its message is the answer's error)."""


class AgentGateway:
    """An OpenAI-compatible server over `sampler` (with its `tokenizer`), recording each episode's calls.
    Use as a context manager, or `start()` and `close()`."""

    def __init__(
        self,
        sampler: Sampler,
        tokenizer: Tokenizer,
        *,
        model_name: str = "rlvr-policy",
        host: str = "127.0.0.1",
        port: int = 0,
        defaults: SamplingSettings | None = None,
        max_length: int | None = None,
        tool_format: str | ToolCallParser = "hermes",
    ):
        self.sampler, self.tokenizer = sampler, tokenizer
        self.model_name, self.host, self.port = model_name, host, port
        self.defaults = defaults or SamplingSettings(max_tokens=DEFAULT_MAX_TOKENS)
        self.parser = get_parser(tool_format)  # reads the tool calls of a chat request with `tools`
        # a call's prompt plus max_tokens must fit: the rollout's bound, else the sampler's context
        self.max_length = max_length if max_length is not None else getattr(sampler, "max_model_len", None)
        self._episodes: dict[str, _Episode] = {}
        self._lock = threading.Lock()  # guards `_episodes` and what they hold
        self._driver: EngineDriver | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # ---- life --------------------------------------------------------------------------------
    def start(self, engine_thread: bool = True) -> AgentGateway:
        """Serve. `engine_thread`: drive the sampler from a thread of the gateway's own; False: the
        caller drives it in its thread with `drive(until)` (a rollout does, `envs.agent.engine`)."""
        uvicorn = _web()[1]
        self._driver = EngineDriver(self.sampler, quiet=self._quiet)
        if engine_thread:
            self._driver.start()
        config = uvicorn.Config(
            self._app(), host=self.host, port=self.port, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="rlvr-agent-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise GatewayError(f"the agent gateway did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]  # port 0: the one the OS chose
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = self._thread = None
        if self._driver is not None:
            self._driver.close()

    def drive(self, until: Callable[[], bool]) -> None:
        """Run the engine in this thread until `until()` is true (a gateway started without its own
        engine thread); a gateway with one just waits as long."""
        driver = self._engine()
        if driver.own_thread:
            while not until():
                time.sleep(0.01)
        else:
            driver.run(until)

    @property
    def engine_failure(self) -> BaseException | None:
        """What the sampler raised, if it failed while serving (`envs.agent.engine`)."""
        return None if self._driver is None else self._driver.failure

    def __enter__(self) -> AgentGateway:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- episodes ----------------------------------------------------------------------------
    def open_episode(self, slot: int = 0) -> str:
        """A new episode's id; its calls go to `base_url(id)`. `slot`: its seed offset (module docstring)."""
        episode_id = uuid.uuid4().hex
        with self._lock:
            self._episodes[episode_id] = _Episode(slot)
        return episode_id

    def base_url(self, episode_id: str) -> str:
        """The `openai` client's `base_url` for this episode."""
        if self._server is None:
            raise GatewayError("the agent gateway is not started")
        return f"http://{self.host}:{self.port}/episodes/{episode_id}/v1"

    def calls(self, episode_id: str) -> list[Call]:
        """The episode's calls so far, in the order they were answered."""
        with self._lock:
            return list(self._known(episode_id).calls)

    def close_episode(self, episode_id: str) -> list[Call]:
        """The episode's calls; later calls to its route are refused (404)."""
        with self._lock:
            calls = list(self._known(episode_id).calls)
            del self._episodes[episode_id]
        return calls

    def _quiet(self) -> int:
        """Open episodes with no call waiting (the engine driver gathers calls until there are none)."""
        with self._lock:
            return sum(1 for e in self._episodes.values() if e.asking == 0)

    def _asks(self, episode_id: str, change: int) -> None:
        with self._lock:
            if episode_id in self._episodes:
                self._episodes[episode_id].asking += change

    def _known(self, episode_id: str) -> _Episode:
        if episode_id not in self._episodes:
            raise GatewayError(f"no open agent episode {episode_id!r}")
        return self._episodes[episode_id]

    # ---- serving -----------------------------------------------------------------------------
    def _app(self) -> Any:
        fastapi = _web()[0]
        Body, FastAPI = fastapi.Body, fastapi.FastAPI
        JSONResponse, Response, StreamingResponse = (
            fastapi.responses.JSONResponse,
            fastapi.responses.Response,
            fastapi.responses.StreamingResponse,
        )

        app = FastAPI(title="rlvr agent gateway")

        def error(status: int, message: str, kind: str) -> JSONResponse:
            return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)

        async def serve(episode_id: str, body: dict[str, Any], chat: bool) -> Response:
            try:
                self.calls(episode_id)
            except GatewayError as e:
                return error(404, str(e), "not_found_error")
            self._asks(episode_id, +1)
            try:
                asked = await asyncio.to_thread(self._ask, episode_id, body, chat)
                served = self._engine().request(asked.prompt_ids, asked.n, asked.sampling)
                samples, version = await asyncio.wrap_future(served)
                answer = await asyncio.to_thread(self._answer, episode_id, asked, samples, version)
            except (_BadRequest, TemplateError, ValueError) as e:
                return error(400, str(e), "invalid_request_error")
            except GatewayError as e:  # closed while it was generating
                return error(404, str(e), "not_found_error")
            except EngineClosedError as e:
                return error(503, str(e), "service_unavailable")
            finally:
                self._asks(episode_id, -1)
            if body.get("stream"):  # the whole answer as server-sent events (`envs.agent.responses`)
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return StreamingResponse(iter(stream_events(answer, include_usage)), media_type="text/event-stream")
            return JSONResponse(answer)

        # The handlers' annotations are strings (`from __future__ import annotations`) that FastAPI
        # resolves in this module's globals: builtins and `Any` only, since fastapi is imported here.
        @app.post("/episodes/{episode_id}/v1/chat/completions")
        async def chat_completions(episode_id: str, body: dict[str, Any] = Body(...)):
            return await serve(episode_id, body, chat=True)

        @app.post("/episodes/{episode_id}/v1/completions")
        async def completions(episode_id: str, body: dict[str, Any] = Body(...)):
            return await serve(episode_id, body, chat=False)

        @app.get("/episodes/{episode_id}/v1/models")
        async def models(episode_id: str):
            return {"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "rlvr"}]}

        return app

    def _engine(self) -> EngineDriver:
        if self._driver is None:
            raise GatewayError("the agent gateway is not started")
        return self._driver

    def _ask(self, episode_id: str, body: dict[str, Any], chat: bool) -> _Asked:
        """A request's prompt ids and settings (in a worker thread: the chat template is CPU work)."""
        n = 1 if body.get("n") is None else body["n"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise _BadRequest(f"n must be a positive integer, got {n!r}")
        with self._lock:
            episode = self._known(episode_id)
            calls, slot = len(episode.calls), episode.slot
        sampling = _sampling(body, self.defaults, slot + calls * TURN_SEED_STRIDE)
        messages = tools = None
        if chat:
            messages, tools = _chat_request(body)
            prompt_ids = self._chat_prompt(episode_id, messages, tools)
        else:
            prompt_ids = self._completion_prompt(body.get("prompt"))
        limit = self.max_length
        if limit is not None and len(prompt_ids) + sampling.max_tokens > limit:
            raise _BadRequest(
                f"the prompt ({len(prompt_ids)} tokens) plus max_tokens ({sampling.max_tokens}) "
                f"exceeds the model's context ({limit})"
            )
        return _Asked(prompt_ids, n, sampling, messages, tools, chat)

    def _answer(self, episode_id: str, asked: _Asked, samples: list[Sample], version: int | None) -> dict[str, Any]:
        """The served samples, recorded as the episode's calls, and the response (in a worker thread)."""
        calls = [
            self._call(asked.prompt_ids, s, version, asked.sampling.stop, asked.messages, asked.tools) for s in samples
        ]
        with self._lock:
            self._known(episode_id).calls.extend(calls)
        return response(calls, self.model_name, asked.chat)

    def _call(
        self,
        prompt_ids: list[int],
        sample: Sample,
        version: int | None,
        stop: Sequence[str],
        messages: list[dict] | None,
        tools: list[dict] | None,
    ) -> Call:
        text = self.tokenizer.decode(list(sample.token_ids), skip_special_tokens=True)
        cuts = [text.find(s) for s in stop if s and s in text]
        text = text[: min(cuts)] if cuts else text  # OpenAI's answer leaves the stop string out
        text, tool_calls = split_tool_calls(text, self.parser) if tools else (text, ())
        return Call(
            prompt_ids=tuple(prompt_ids),
            completion_ids=tuple(sample.token_ids),
            logprobs=tuple(float(x) for x in sample.logprobs),
            finish_reason=sample.finish_reason,
            version=version,
            versions=tuple(sample.versions),
            text=text,
            messages=None if messages is None else tuple(messages),
            tools=None if tools is None else tuple(tools),
            tool_calls=tool_calls,
        )

    def _chat_prompt(self, episode_id: str, messages: list[dict], tools: list[dict] | None) -> list[int]:
        """Prompt ids for a chat call: an earlier call's ids extended when the messages continue it
        (module docstring), else the chat template's rendering of the whole conversation. The
        template lists `tools` when the tool format is one it renders (Hermes), not for one the
        prompt teaches itself (markdown), as `envs.tool_env` does."""
        listed = tools if self.parser.renders_tools else None
        for call in reversed(self.calls(episode_id)):
            if (
                call.messages is None
                or (call.tools is None) != (tools is None)
                or (tools and list(call.tools) != tools)
            ):
                continue
            k = len(call.messages)
            if len(messages) <= k + 1 or list(call.messages) != messages[:k] or not _is_answer(messages[k], call):
                continue
            answered = list(call.messages) + [messages[k]]  # rendered only to find where the new messages start
            ended = bool(call.completion_ids) and call.completion_ids[-1] == self.tokenizer.eos_token_id
            try:
                extra = reply_ids(self.tokenizer, answered, messages[k + 1 :], ended, listed)
            except TemplateError:
                break  # no prefix property: render whole
            return list(call.prompt_ids) + list(call.completion_ids) + extra
        return template_ids(self.tokenizer, messages, True, listed)

    def _completion_prompt(self, prompt: Any) -> list[int]:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one (the openai client's list form)
        if isinstance(prompt, str) and prompt:
            return [int(t) for t in self.tokenizer.encode(prompt, add_special_tokens=False)]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return list(prompt)
        raise _BadRequest("prompt must be one non-empty string or one non-empty list of token ids")


def _is_answer(message: Any, call: Call) -> bool:
    """Whether `message` is the answer `call` was sent back, unchanged: its content and tool calls."""
    return (
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and (message.get("content") or "") == call.text
        and same_tool_calls(message.get("tool_calls"), call.tool_calls)
    )


def _chat_request(body: dict[str, Any]) -> tuple[list[dict], list[dict] | None]:
    messages, tools = body.get("messages"), body.get("tools")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise _BadRequest("messages must be a non-empty list of objects with a role")
    # The openai client sends the fields a message object has, some as null: the template sees what
    # was given, less the nulls (a template tests `'tool_calls' in message`, not its value).
    messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise _BadRequest("tools must be a list of objects")
    return messages, (tools or None)


@dataclass
class _Episode:
    """An open episode: its calls in the order answered, its seed offset, its calls not yet answered."""

    slot: int
    calls: list[Call] = field(default_factory=list)
    asking: int = 0


@dataclass(frozen=True)
class _Asked:
    """One request, read: what to sample, and the chat request it came from."""

    prompt_ids: list[int]
    n: int
    sampling: SamplingSettings
    messages: list[dict] | None
    tools: list[dict] | None
    chat: bool


def _sampling(body: dict[str, Any], defaults: SamplingSettings, seed_offset: int) -> SamplingSettings:
    """The request's settings; those it leaves out are the gateway's `defaults` (the rollout's), and
    with a default seed, its seed is the default + `seed_offset` (module docstring)."""
    stop = body.get("stop")
    stop = () if stop is None else (stop,) if isinstance(stop, str) else tuple(stop)
    if not all(isinstance(s, str) for s in stop):
        raise _BadRequest("stop must be a string or a list of strings")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or defaults.max_tokens
    temperature, top_p, seed = body.get("temperature"), body.get("top_p"), body.get("seed")
    if seed is None and defaults.seed is not None:
        seed = defaults.seed + seed_offset
    try:
        return SamplingSettings(
            temperature=defaults.temperature if temperature is None else float(temperature),
            top_p=defaults.top_p if top_p is None else float(top_p),
            max_tokens=int(max_tokens),
            stop=stop,
            seed=None if seed is None else int(seed),
        )
    except (TypeError, ValueError) as e:
        raise _BadRequest(str(e)) from None
