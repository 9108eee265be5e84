"""Samplers (vLLM, Hugging Face, OpenAI-compatible), policy and value models, the RL maths and the
training loop. The only package that imports torch."""
