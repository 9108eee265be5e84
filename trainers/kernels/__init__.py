"""The RL maths as config-free kernels: pure functions of `(batch, time)` tensors, masks and scalars,
no models, no settings (`trainers.dispatch` calls them as a preset of `trainers.algorithms` asks).

- `advantages`: REINFORCE, RLOO, GRPO, GAE, distillation's per-token advantage, whitening, and DAPO's
  sample filters and length penalty;
- `policy_loss`: the clipped ratio (token or sequence level), CISPO, the on-policy gradient;
- `value_loss`: PPO's clipped value loss;
- `kl`: the k1, k2, k3 estimators to the reference model and the entropy term;
- `rollout_correction`: importance weights from the sampler's policy to the trainer's;
- `aggregation`: masks and the reductions of a per-token loss to a scalar;
- `log_ratio`: the one clamp on a log-ratio before exp();
- `names`: the names the kernels take (aggregations, loss types, ratio levels, KL estimators), a
  leaf without torch that the presets validate against."""
