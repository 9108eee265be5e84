"""rlvr/ReasoningGym-v0 with real reasoning-gym datasets (all generated offline)."""

from __future__ import annotations

import pytest

from rlvr import envs
from rlvr.envs.tasks.reasoning_gym_env import ReasoningGymEnv
from rlvr.verifiers.verdict import Outcome

DATASETS = ["chain_sum", "leg_counting", "spell_backward"]


@pytest.mark.parametrize("dataset", DATASETS)
def test_passes_check_env_with_its_own_scorer(dataset):
    envs.check_env(envs.make("rlvr/ReasoningGym-v0", dataset=dataset, size=50, seed=1))


def test_passes_check_env_with_the_rlvr_verifier():
    envs.check_env(envs.make("rlvr/ReasoningGym-v0", dataset="chain_sum", size=50, scorer="rlvr"))


def test_prompt_answer_tags_and_scores():
    env = ReasoningGymEnv(dataset="chain_sum", size=20, seed=3, min_terms=2, max_terms=2)
    obs, info = env.reset(options={"task_id": "4"})
    assert [m["role"] for m in obs] == ["system", "user"] and "<answer>" in obs[0]["content"]
    entry = env.dataset[4]
    assert obs[1]["content"] == entry["question"] and entry["metadata"]["num_terms"] == 2
    _, reward, _, _, info = env.step(f"<think>adding</think> <answer>{entry['answer']}</answer>")
    assert reward == 1.0 and info["verdict"].outcome is Outcome.CORRECT
    env.reset(options={"task_id": "4"})
    _, reward, _, _, info = env.step(entry["answer"])  # right number, but no tags
    assert reward == 0.0 and info["verdict"].outcome is Outcome.FORMAT_ERROR


def test_rlvr_scorer_reads_latex_the_dataset_scorer_does_not():
    import sympy as sp

    rg = ReasoningGymEnv(dataset="polynomial_multiplication", size=10, seed=0)
    ours = ReasoningGymEnv(dataset="polynomial_multiplication", size=10, seed=0, scorer="rlvr")
    task = rg.get_task("1")  # the answer is SymPy syntax, e.g. -896*x**5 + 2240*x**4 + 3584*x**3
    response = f"<answer>{sp.latex(sp.sympify(task.answer))}</answer>"  # the same polynomial in LaTeX
    assert rg.verify(task, response).score == 0.0
    assert ours.verify(task, response).score == 1.0
    assert ours.verify(task, f"<answer>{sp.latex(sp.sympify(task.answer) + 1)}</answer>").score == 0.0


def test_partial_credit_knob():
    # advanced_geometry gives 0.01 for any well-formed wrong answer.
    kept = ReasoningGymEnv(dataset="advanced_geometry", size=5, seed=0)
    off = ReasoningGymEnv(dataset="advanced_geometry", size=5, seed=0, partial_credit=False)
    task = kept.get_task("0")
    assert kept.verify(task, "<answer>nonsense</answer>").score == pytest.approx(0.01)
    assert off.verify(task, "<answer>nonsense</answer>").score == 0.0
    assert off.verify(task, task.reference).score == 1.0


def test_scorer_exceptions_become_format_errors():
    env = ReasoningGymEnv(dataset="prime_factorization", size=5, seed=0)
    verdict = env.verify(env.get_task("0"), "<answer>two times three</answer>")
    assert verdict.outcome is Outcome.FORMAT_ERROR and "could not read the answer" in verdict.detail


def test_hostile_answers_are_bounded_by_the_scorer_deadline():
    import time

    env = ReasoningGymEnv(dataset="simple_integration", size=3, seed=0, score_timeout_s=1.0)
    task = env.get_task("0")
    assert env.verify(task, task.reference).score == 1.0  # also starts the scorer workers
    start = time.perf_counter()
    verdict = env.verify(task, "<answer>9**9**9**9</answer>")  # SymPy inside the scorer never returns
    assert time.perf_counter() - start < 3.0
    assert verdict.outcome is Outcome.ERROR and "took over 1 s" in verdict.detail


def test_huge_answers_are_refused_quickly():
    env = ReasoningGymEnv(dataset="spell_backward", size=5, seed=0)
    verdict = env.verify(env.get_task("0"), "<answer>" + "a" * 100_000 + "</answer>")
    assert verdict.outcome is Outcome.FORMAT_ERROR and "longer than" in verdict.detail


def test_clear_errors_for_bad_arguments():
    with pytest.raises(
        envs.EnvArgumentError, match="unknown reasoning-gym dataset 'chain_summ'; did you mean chain_sum"
    ):
        envs.make("rlvr/ReasoningGym-v0", dataset="chain_summ")
    with pytest.raises(envs.EnvArgumentError, match="rejected its config .*fields are: allow_negation, max_digits"):
        envs.make("rlvr/ReasoningGym-v0", dataset="chain_sum", colour="red")
    with pytest.raises(envs.EnvArgumentError, match="max_terms must be >= min_terms"):
        envs.make("rlvr/ReasoningGym-v0", dataset="chain_sum", min_terms=5, max_terms=2)
    with pytest.raises(envs.EnvArgumentError, match="scorer must be one of"):
        envs.make("rlvr/ReasoningGym-v0", scorer="judge")
    with pytest.raises(envs.EnvArgumentError, match="score_timeout_s must be in"):
        envs.make("rlvr/ReasoningGym-v0", score_timeout_s=0)
    with pytest.raises(envs.EnvArgumentError, match="gives no reference answers"):
        envs.make("rlvr/ReasoningGym-v0", dataset="graph_color", size=3)
    env = ReasoningGymEnv(dataset="chain_sum", size=5)
    with pytest.raises(envs.TaskNotFoundError, match="indices 0..4"):
        env.reset(options={"task_id": "5"})
