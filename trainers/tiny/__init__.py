"""The built-in models rlvr builds itself, from scratch and without a download: `model` builds the
~1M-parameter default (`--model tiny`, shipped in `trainers/assets/tiny`) from the conversations of
`corpus` (whose code tasks are `code_tasks`'), and `small_model` the ~30M-parameter random model of
the benchmarks (`--model small`, built into the cache on first use). No training step runs this code."""
