"""rlvr: the command-line front end that wires envs, verifiers, sandbox and trainers together."""
