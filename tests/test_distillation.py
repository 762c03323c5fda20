"""Distillation: a student learns a fixed teacher on the toy (feed-forward and history-only recurrent), DAgger's
teacher probability, the constructor contract, and rsl_rl-format teachers built with rsl_rl's own classes."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from mimic_rl.algorithms import Distillation
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.storage import RolloutStorageMM


class ToyExpert(nn.Module):
    """A fixed teacher for the point-mass toy: reference velocity plus a pull toward the reference position."""

    def __init__(self, gain: float = 2.0, group: str = "reference") -> None:
        super().__init__()
        self.gain, self.group = gain, group

    def forward(self, obs: TensorDict) -> torch.Tensor:
        ref = obs[self.group]
        d = ref.shape[-1] // 2
        return ref[:, 0, d:] + self.gain * ref[:, 0, :d]


class GainAwareExpert(ToyExpert):
    """Knows each episode's hidden actuator gain (privileged, last ``critic`` column) and divides by it."""

    def forward(self, obs: TensorDict) -> torch.Tensor:
        return (super().forward(obs) / obs["critic"][:, -1:]).clamp(-1.0, 1.0)


def distill(env, student: dict, iterations: int, algorithm: dict | None = None, steps: int = 24, teacher=None):
    """Distil ``ToyExpert`` into a student on ``env``; returns the algorithm and the per-iteration action MSE."""
    obs = env.get_observations()
    cfg = {
        "algorithm": {"learning_rate": 3e-3, "gradient_length": 8, "teacher_action_prob": 0.0, **(algorithm or {})},
        "student": {"hidden_dims": [64, 64], **student},
        "teacher": teacher or ToyExpert(),
        "num_steps_per_env": steps,
    }
    alg = Distillation.construct_algorithm(obs, env, cfg, "cpu")
    alg.train_mode()
    errors = []
    for _ in range(iterations):
        with torch.inference_mode():
            for _ in range(steps):
                obs, rew, dones, extras = env.step(alg.act(obs))
                alg.process_env_step(obs, rew, dones, extras)
        errors.append(alg.collection_logs()["distill/action_error"])
        alg.update()
    return alg, obs, errors


def student_mse(alg, env, obs, steps: int = 100, skip_first: int = 0) -> float:
    """Mean squared action error of the student against the teacher on states the student itself visits (leaving out
    the first ``skip_first`` steps of each episode)."""
    alg.eval_mode()
    err, count = 0.0, 0
    with torch.inference_mode():
        for _ in range(steps):
            s_obs, ref, mask = alg._student_inputs(obs)
            action = alg.student(s_obs, ref, mask)
            keep = env.episode_length_buf >= skip_first
            err += float((action - alg.teacher(obs)).square().mean(-1)[keep].sum())
            count += int(keep.sum())
            obs, _, dones, _ = env.step(action)
            alg.student.reset(dones)
    return err / count


def test_a_student_reaches_an_action_mse_under_1e_3_within_seconds():
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=64, seed=0)
    student = {"hidden_dims": [128, 128], "obs_normalization": False}
    alg, obs, errors = distill(env, student, 50, {"learning_rate": 1e-3, "gradient_length": 4})  # ~3 s
    mse = student_mse(alg, env, obs)
    assert mse < 1e-3, (mse, errors)
    assert errors[0] > 30 * mse  # it learned (the first rollout's untrained error)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_a_recurrent_history_only_student_learns_the_toy(rnn_type):
    """The student reads a position sensor and the reference command: no velocity and no actuator gain, which the
    teacher uses (privileged); it has to infer both from its history."""
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=64, seed=0, action_gain_range=(0.4, 2.5))
    student = {"rnn_type": rnn_type, "rnn_hidden_dim": 32}
    alg, obs, errors = distill(env, student, 40, {"student_obs_group": "proprio"}, teacher=GainAwareExpert())
    assert alg.student.is_recurrent and alg.student.obs_dim == 2
    mse = student_mse(alg, env, obs)
    assert mse < 1e-2 and errors[0] > 20 * mse, (mse, errors)


def test_teacher_actions_are_executed_with_a_decaying_probability():
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=256, seed=0)
    beta = {"mode": "linear", "initial": 1.0, "final": 0.0, "end": 4}
    obs = env.get_observations()
    cfg = {"algorithm": {"teacher_action_prob": beta}, "student": {"hidden_dims": [16]}, "teacher": ToyExpert()}
    alg = Distillation.construct_algorithm(obs, env, cfg, "cpu")
    fractions = []
    for it in range(6):
        executed_teacher = []
        with torch.inference_mode():
            for _ in range(8):
                actions = alg.act(obs)
                executed_teacher.append((actions == alg.transition["privileged_actions"]).all(-1).float().mean())
                if it == 0:  # beta = 1: every env runs the teacher, and the storage keeps its labels
                    assert torch.equal(actions, ToyExpert()(obs))
                obs, rew, dones, extras = env.step(actions)
                alg.process_env_step(obs, rew, dones, extras)
        fractions.append(float(torch.stack(executed_teacher).mean()))
        logged = alg.collection_logs()
        assert logged["distill/beta"] == pytest.approx(beta["initial"] - it / 4 if it < 4 else 0.0)
        alg.update()
    expected = [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert fractions == pytest.approx(expected, abs=0.05), fractions


def _storage(n: int = 4, t: int = 16, obs_dim: int = 3, actions: int = 2) -> RolloutStorageMM:
    return RolloutStorageMM("distillation", n, t, (obs_dim,), (None,), (None,), (None,), (actions,))


def test_constructor_keeps_rsl_rl_arguments_and_rejects_unknown_ones():
    from mimic_rl.models import Actor

    student, storage = Actor(3, 2, hidden_dims=[8]), _storage()
    alg = Distillation(student, ToyExpert(), storage, 2, 5, 1e-4, 1.0, "huber", "adamw", "cpu", None)
    assert (alg.num_learning_epochs, alg.gradient_length, alg.learning_rate) == (2, 5, 1e-4)
    assert alg.max_grad_norm == 1.0 and alg.loss_type == "huber" and isinstance(alg.optimizer, torch.optim.AdamW)
    with pytest.raises(TypeError, match="num_mini_batches"):
        Distillation(student, ToyExpert(), storage, num_mini_batches=4)
    with pytest.raises(ValueError, match="loss_type"):
        Distillation(student, ToyExpert(), storage, loss_type="l1")
    with pytest.raises(ValueError, match="privileged"):
        Distillation(student, ToyExpert(), storage, student_obs_group="critic")
    env = PointMassTrackingEnv(num_envs=4)
    cfg = {"algorithm": {"clip_param": 0.2}, "teacher": ToyExpert()}
    with pytest.raises(ValueError, match=r"cfg\['algorithm'\]\['clip_param'\]: unknown key; valid keys: "):
        Distillation.construct_algorithm(env.get_observations(), env, cfg, "cpu")
    with pytest.raises(ValueError, match=r"teacher\.checkpoint: expected a trained policy"):
        Distillation.construct_algorithm(env.get_observations(), env, {"teacher": {}}, "cpu")


def test_one_update_matches_rsl_rl_distillation():
    """Same MLP weights, same rollout, 2 chunks of 8 steps: identical student parameters after the update."""
    pytest.importorskip("rsl_rl")
    from rsl_rl.algorithms import Distillation as RslRlDistillation
    from rsl_rl.models import MLPModel
    from rsl_rl.storage import RolloutStorage

    from mimic_rl.models import Actor

    torch.manual_seed(0)
    n, t, d, a = 6, 16, 5, 3
    example = TensorDict({"policy": torch.zeros(n, d)}, batch_size=[n])
    groups = {"student": ["policy"], "teacher": ["policy"]}
    theirs = MLPModel(example, groups, "student", a, hidden_dims=[32, 16])
    teacher = MLPModel(example, groups, "teacher", a, hidden_dims=[8])
    ours = Actor(d, a, hidden_dims=[32, 16], obs_normalization=False)
    linears = [m for m in ours.mlp.modules() if isinstance(m, nn.Linear)]
    for mine, their in zip(linears, [m for m in theirs.mlp if isinstance(m, nn.Linear)], strict=True):
        mine.load_state_dict(their.state_dict())
    their_storage = RolloutStorage("distillation", n, t, example, [a])
    alg_theirs = RslRlDistillation(theirs, teacher, their_storage, gradient_length=8, learning_rate=1e-3)
    alg_ours = Distillation(ours, ToyExpert(), _storage(n, t, d, a), gradient_length=8, learning_rate=1e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(t):
        obs, labels = torch.randn(n, d, generator=g), torch.randn(n, a, generator=g)
        dones = torch.rand(n, generator=g) < 0.1
        for storage, obs_value in (
            (their_storage, TensorDict({"policy": obs}, batch_size=[n])),
            (alg_ours.storage, obs),
        ):
            tr = storage.Transition()
            tr.observations, tr.actions, tr.privileged_actions = obs_value, torch.randn(n, a), labels
            tr.rewards, tr.dones = torch.zeros(n), dones
            storage.add_transition(tr)
    loss_theirs = alg_theirs.update()["behavior"]
    loss_ours = alg_ours.update()["behavior"]
    for mine, their in zip(linears, [m for m in theirs.mlp if isinstance(m, nn.Linear)], strict=True):
        torch.testing.assert_close(mine.weight, their.weight, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(mine.bias, their.bias, atol=1e-6, rtol=1e-5)
    assert loss_ours == pytest.approx(loss_theirs * 1.0, rel=1e-5)


def _rsl_rl_teacher(obs, hidden_dims, path):
    from rsl_rl.models import MLPModel

    groups = {"actor": ["policy", "critic"], "critic": ["critic"]}
    dist = {"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 0.3}
    teacher = MLPModel(obs, groups, "actor", 2, hidden_dims=hidden_dims, obs_normalization=True, distribution_cfg=dist)
    teacher.train()
    teacher.update_normalization(TensorDict({k: obs[k] * 3 + 1 for k in ("policy", "critic")}, batch_size=[16]))
    teacher.eval()
    torch.save({"actor_state_dict": teacher.state_dict(), "iter": 500}, path)  # what rsl_rl's runner saves
    return teacher


def test_an_rsl_rl_checkpoint_made_with_rsl_rl_classes_is_a_teacher(tmp_path):
    pytest.importorskip("rsl_rl")
    env = PointMassTrackingEnv(num_envs=16, seed=0)
    obs = env.get_observations()
    path = tmp_path / "model_500.pt"
    rsl_teacher = _rsl_rl_teacher(obs, [32, 16], path)
    teacher_cfg = {"checkpoint": str(path), "obs_groups": ["policy", "critic"]}
    cfg = {"student": {"hidden_dims": [16]}, "teacher": teacher_cfg}
    alg = Distillation.construct_algorithm(obs, env, cfg, "cpu")
    assert alg.teacher_loaded
    with torch.no_grad():
        torch.testing.assert_close(alg.teacher(obs), rsl_teacher(obs))
    # A distillation checkpoint rebuilds that teacher by itself; load() restores student, teacher and optimizer.
    alg.act(obs)
    saved = alg.save()
    fresh = Distillation.construct_algorithm(
        obs, env, {"student": {"hidden_dims": [16]}, "teacher": saved["teacher_cfg"]}, "cpu"
    )
    assert not fresh.teacher_loaded
    fresh.load(saved)
    assert fresh.teacher_loaded and fresh.iteration == alg.iteration
    with torch.no_grad():
        torch.testing.assert_close(fresh.teacher(obs), rsl_teacher(obs))
        torch.testing.assert_close(
            fresh.student(obs["policy"], obs["reference"]), alg.student(obs["policy"], obs["reference"])
        )
    # rsl_rl's default: loading a training checkpoint loads the teacher only; a wrong architecture names the layer.
    assert fresh.load(torch.load(path)) is False
    _rsl_rl_teacher(obs, [64, 16], tmp_path / "wider.pt")
    with pytest.raises(
        ValueError, match=r"teacher layer 'mlp\.0\.weight': checkpoint has shape \(64, 9\), model \(32, 9\)"
    ):
        fresh.load(torch.load(tmp_path / "wider.pt"))


def test_this_package_training_checkpoint_is_a_teacher(tmp_path):
    from helpers import toy_cfg

    from mimic_rl.algorithms import MMPPO

    env = PointMassTrackingEnv(num_envs=16, seed=0)
    obs = env.get_observations()
    ppo = MMPPO.construct_algorithm(obs, env, toy_cfg(), "cpu")
    with torch.no_grad():
        for p in ppo.actor.parameters():
            p.add_(0.1 * torch.randn_like(p))
    torch.save(ppo.save(), tmp_path / "teacher.pt")
    alg = Distillation.construct_algorithm(obs, env, {"teacher": {"checkpoint": str(tmp_path / "teacher.pt")}}, "cpu")
    with torch.no_grad():
        torch.testing.assert_close(alg.teacher(obs), ppo.actor(obs["policy"], obs["reference"], obs["reference_mask"]))
    with pytest.raises(FileNotFoundError, match=r"missing\.pt"):
        Distillation.construct_algorithm(obs, env, {"teacher": {"checkpoint": str(tmp_path / "missing.pt")}}, "cpu")


def test_non_finite_labels_are_skipped_then_raise():
    from mimic_rl.models import Actor

    alg = Distillation(Actor(3, 2, hidden_dims=[8]), ToyExpert(), _storage(t=8), gradient_length=2)
    before = [p.clone() for p in alg.student.parameters()]

    def fill(bad_steps):
        for step in range(8):
            tr = alg.storage.Transition()
            tr.observations, tr.actions = torch.randn(4, 3), torch.zeros(4, 2)
            tr.privileged_actions = torch.full((4, 2), float("nan")) if step in bad_steps else torch.zeros(4, 2)
            tr.rewards, tr.dones = torch.zeros(4), torch.zeros(4, dtype=torch.bool)
            alg.storage.add_transitions(tr)

    fill(bad_steps={0})  # one bad chunk of four: skipped, counted, the rest trains
    out = alg.update()
    assert out["nonfinite_batches"] == 1 and all(bool(torch.isfinite(p).all()) for p in alg.student.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, alg.student.parameters()))
    fill(bad_steps=set(range(8)))
    with pytest.raises(FloatingPointError, match="3 consecutive chunks had a non-finite behaviour loss"):
        alg.update()
