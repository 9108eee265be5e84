"""Agent programs as environments (`rlvr/Agent-v0`): the user's own agent, written against the plain
`openai` client, trained through an OpenAI-compatible gateway over the rollout's sampler.

- `env`: `AgentEnv`, the Gymnasium environment a rollout hands its whole call to (`play`);
- `play`: runs G agents per task against the gateway, grades them, turns their calls into episodes;
- `gateway`: the OpenAI-compatible HTTP server an agent talks to, one route per episode;
- `engine`: the one thread that calls the sampler for every concurrent request of the gateway;
- `responses`: the gateway's wire format (answers, server-sent events, tool calls);
- `calls`: the recording rule, an episode's served calls -> token-exact training segments.

Nothing is imported here: the registry names `rlvr.envs.agent.env:AgentEnv` by string, so `import rlvr.envs`
loads none of these modules (and the gateway loads fastapi and uvicorn only when one is built)."""
