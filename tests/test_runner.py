"""The main job: runner smoke tests, bitwise resume, crash-safe checkpoints, export, CLI, strict configs."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import straight_and_resumed

from mimic_rl.cli import main
from mimic_rl.config import ConfigError, TrainConfig, load_config
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.export import export_policy
from mimic_rl.runners import OnPolicyRunner, load_checkpoint, save_checkpoint


def small_cfg(data_dir=None, **runner) -> TrainConfig:
    cfg = load_config("tracking_ppo")
    cfg.runner.num_steps_per_env = 8
    cfg.runner.time_budget_s = None
    cfg.runner.logger = "none"
    cfg.runner.save_interval = 1000
    for key, value in runner.items():
        setattr(cfg.runner, key, value)
    cfg.env.num_envs = 4
    if data_dir is not None:
        cfg.env.motions = [str(data_dir / "motions/humanoid28/humanoid_walk.npz")]
    cfg.algorithm.update(num_mini_batches=2, num_learning_epochs=2)
    cfg.actor.update(hidden_dims=[32, 32])
    cfg.critic.update(hidden_dims=[32, 32])
    return cfg


def test_runner_smoke_on_the_toy_env(tmp_path):
    cfg = small_cfg()
    cfg.actor = {"hidden_dims": [32], "init_noise_std": 0.5}
    cfg.critic = {"hidden_dims": [32]}
    env = PointMassTrackingEnv(num_envs=8)
    runner = OnPolicyRunner(cfg, log_dir=tmp_path, env=env)
    out = runner.learn(3)
    assert runner.iteration == 3 and "loss/surrogate" in out and out["perf/total_steps"] == 3 * 8 * 8
    assert (tmp_path / "model_3.pt").is_file() and (tmp_path / "config.yaml").is_file()
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3


def test_a_save_cut_short_by_an_interrupt_is_redone_before_exiting(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while the periodic checkpoint is being written: the interrupt handler writes it again
    (before, the half-done save counted as done and the run exited without that iteration's checkpoint)."""
    cfg = small_cfg(save_interval=2)
    cfg.actor = {"hidden_dims": [32], "init_noise_std": 0.5}
    cfg.critic = {"hidden_dims": [32]}
    runner = OnPolicyRunner(cfg, log_dir=tmp_path, env=PointMassTrackingEnv(num_envs=8))
    save, calls = runner.save, []

    def interrupted_once(path):
        calls.append(path.name)
        if len(calls) == 1:
            raise KeyboardInterrupt  # as the signal lands mid-write (the write is atomic: nothing is left)
        return save(path)

    monkeypatch.setattr(runner, "save", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        runner.learn(5)
    assert calls == ["model_2.pt", "model_2.pt"] and (tmp_path / "model_2.pt").is_file()


class SparseLogEnv(PointMassTrackingEnv):
    """Logs ``Episode_Reward/x`` = 2 on every third step only, as mjlab and Isaac Lab log episode sums at resets."""

    def step(self, actions):
        obs, rewards, dones, extras = super().step(actions)
        self.calls = getattr(self, "calls", 0) + 1
        extras["log"] = {"dense": torch.tensor(float(self.calls))}
        if self.calls % 3 == 0:
            extras["log"]["Episode_Reward/x"] = torch.tensor(2.0)
        return obs, rewards, dones, extras


def test_a_key_logged_on_some_steps_is_averaged_over_those_steps(tmp_path):
    cfg = small_cfg()
    cfg.actor = {"hidden_dims": [32], "init_noise_std": 0.5}
    cfg.critic = {"hidden_dims": [32]}
    out = OnPolicyRunner(cfg, log_dir=None, env=SparseLogEnv(num_envs=8)).learn(1)
    t = cfg.runner.num_steps_per_env
    assert out["Episode_Reward/x"] == 2.0  # not 2 * (t // 3) / t
    assert out["env/dense"] == sum(range(1, t + 1)) / t


def test_runner_smoke_on_the_mujoco_env(tmp_path, data_dir):
    cfg = small_cfg(data_dir, logger="tensorboard")
    runner = OnPolicyRunner(cfg, log_dir=tmp_path)
    out = runner.learn(2)
    runner.close()
    assert {"metrics/root_mpjpe_mm", "reward/body_pos", "loss/value"} <= set(out)
    state = load_checkpoint(tmp_path / "model_2.pt")
    assert state["iteration"] == 2 and state["config"]["env"]["num_envs"] == 4 and "env_state" in state
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())
    assert load_config(tmp_path / "config.yaml").env.num_envs == 4  # the resolved config reloads


def _params(runner):
    return {
        **{f"a.{k}": v for k, v in runner.alg.actor.state_dict().items()},
        **{f"c.{k}": v for k, v in runner.alg.critic.state_dict().items()},
    }


def test_resume_is_bitwise_identical_to_training_straight_through(tmp_path, data_dir):
    straight, resumed = straight_and_resumed(lambda d: OnPolicyRunner(small_cfg(data_dir), log_dir=d), tmp_path, 4, 2)
    assert resumed.iteration == straight.iteration == 4
    a, b = _params(straight), _params(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert straight.alg.learning_rate == resumed.alg.learning_rate
    assert (straight.env.physics.state == resumed.env.physics.state).all()


def test_an_exception_mid_save_leaves_the_previous_checkpoint_loadable(tmp_path, monkeypatch):
    path = tmp_path / "model_1.pt"
    save_checkpoint({"iteration": 1, "w": torch.arange(5.0)}, path)

    def broken_save(obj, f, *args, **kwargs):
        f.write(b"partial garbage")
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint({"iteration": 2, "w": torch.zeros(5)}, path)
    monkeypatch.undo()
    state = load_checkpoint(path)
    assert state["iteration"] == 1 and torch.equal(state["w"], torch.arange(5.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_1.pt"]  # no temporary file left behind


def test_onnx_and_torchscript_equal_torch(tmp_path, data_dir):
    runner = OnPolicyRunner(small_cfg(data_dir), log_dir=None)
    runner.learn(1)  # non-trivial normalizer statistics
    actor = runner.alg.actor
    paths = export_policy(actor, tmp_path)
    obs = runner.env.get_observations()
    with torch.no_grad():
        expected = actor(obs["policy"], obs["reference"], obs["reference_mask"])
    scripted = torch.jit.load(str(paths["torchscript"]))
    torch.testing.assert_close(
        scripted(obs["policy"], obs["reference"], obs["reference_mask"]), expected, atol=1e-5, rtol=0
    )
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(paths["onnx"]), providers=["CPUExecutionProvider"])
    feed = {
        "policy": obs["policy"].numpy(),
        "reference": obs["reference"].numpy(),
        "reference_mask": obs["reference_mask"].numpy(),
    }
    torch.testing.assert_close(torch.from_numpy(session.run(["actions"], feed)[0]), expected, atol=1e-5, rtol=0)
    meta = json.loads(paths["metadata"].read_text())
    assert meta["inputs"]["reference"] == list(obs["reference"].shape[1:])


def test_cli_end_to_end(tmp_path, data_dir):
    run = tmp_path / "run"
    code = main(
        [
            "train",
            "--num-envs",
            "4",
            "--iterations",
            "2",
            "--log-dir",
            str(run),
            "--logger",
            "none",
            "--eval-envs",
            "2",
            "--motion",
            str(data_dir / "motions/humanoid28/humanoid_run.npz"),
        ]
    )
    assert code == 0
    checkpoint = run / "model_2.pt"
    evaluation = json.loads((run / "eval.json").read_text())
    clip = evaluation["clips"][0]
    assert clip["name"] == "humanoid_run" and clip["num_envs"] == 2 and 0 <= clip["success_rate"] <= 1
    assert clip["global_mpjpe_mm"] > 0 and len(clip["per_body_mpjpe_mm"]) == 15 and clip["over_time"]["global_mpjpe_mm"]
    for png in ("per_body_error.png", "error_over_time.png", "success_per_clip.png", "training_curves.png"):
        assert (run / "plots" / png).stat().st_size > 5000
    assert main(["eval", "--checkpoint", str(checkpoint), "--output", str(tmp_path / "e.json"), "--num-envs", "2"]) == 0
    assert main(["plot", str(tmp_path / "e.json"), "--output", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "training_curves.png").stat().st_size > 5000  # found the run's log by itself
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(tmp_path / "export")]) == 0
    assert json.loads((tmp_path / "export" / "policy.json").read_text())["joint_names"][0] == "abdomen_x"
    code = main(["train", "--iterations", "1", "--log-dir", str(run), "--resume", "--logger", "none", "--no-eval"])
    assert code == 0 and (run / "model_3.pt").is_file()  # resumed at iteration 2 with the run's own config


@pytest.mark.parametrize(
    "data, message",
    [
        ({"runner": {"max_iteration": 5}}, "runner.max_iteration: unknown key; did you mean runner.max_iterations?"),
        ({"env": {"num_env": 4}}, "env.num_env: unknown key; did you mean env.num_envs?"),
        (
            {"env": {"reward": {"body_pos_weigth": 1.0}}},
            "env.reward.body_pos_weigth: unknown key; did you mean env.reward.body_pos_weight?",
        ),
        (
            {"algorithm": {"learning_rat": 1}},
            "algorithm.learning_rat: unknown key; did you mean algorithm.learning_rate?",
        ),
        ({"actor": {"hidden_dim": [8]}}, "actor.hidden_dim: unknown key; did you mean actor.hidden_dims?"),
        ({"trainer": {}}, "trainer: unknown key; did you mean runner?"),
        ({"xyz": {}}, "xyz: unknown key; valid keys: actor, algorithm, critic, env, obs_groups, runner"),
        (
            {"algorithm": {"amp_cfg": {"styl_weight": 1.0}}},
            "algorithm.amp_cfg.styl_weight: unknown key; did you mean algorithm.amp_cfg.style_weight?",
        ),
    ],
)
def test_an_unknown_config_key_is_named_with_the_closest_valid_one(data, message):
    """The whole message: the key's full path, and the valid key it is closest to (or the valid keys)."""
    with pytest.raises(ConfigError) as info:
        load_config(data)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "data, pattern",
    [
        ({"runner": {"save_interval": "often"}}, r"runner\.save_interval: expected a whole number, found 'often'"),
        ({"env": {"num_envs": 0}}, r"env\.num_envs: expected a number >= 1, found 0"),
        ({"env": {"num_envs": True}}, r"env\.num_envs: expected a whole number, found True"),
        (
            {"env": {"sampling_mode": "random"}},
            r"env\.sampling_mode: expected one of \['start', 'uniform', 'adaptive'\]",
        ),
        ({"env": {"reward": {"body_pos_std": 0.0}}}, r"env\.reward\.body_pos_std: expected a number > 0, found 0\.0"),
        ({"env": {"episode_length_s": float("nan")}}, r"env\.episode_length_s: expected a number > 0, found nan"),
        ({"runner": {"logger": "mlflow"}}, r"runner\.logger: expected one of \['tensorboard', 'wandb', 'none'\]"),
        ({"algorithm": {"learning_rate": "fast"}}, r"algorithm\.learning_rate: expected a number, found 'fast'"),
        ({"actor": {"hidden_dims": 256}}, r"^actor\.hidden_dims: expected a list of whole numbers, found 256$"),
        ({"actor": {"hidden_dims": [64, 3.5]}}, r"^actor\.hidden_dims: expected a list of whole numbers, found"),
        ({"algorithm": {"num_learning_epochs": 2.5}}, r"^algorithm\.num_learning_epochs: expected a whole number"),
        ({"algorithm": {"desired_kl": "x"}}, r"^algorithm\.desired_kl: expected a number or null, found 'x'$"),
        ({"algorithm": {"use_clipped_value_loss": 1}}, r"expected true or false, found 1$"),
        ({"algorithm": {"amp_cfg": {"style_weight": "x"}}}, r"^algorithm\.amp_cfg\.style_weight: expected a number"),
        ({"env": {"motions": "walk.npz"}}, r"^env\.motions: expected a list of strings, found 'walk\.npz'$"),
        ({"runner": "fast"}, r"^runner: expected a mapping of RunnerConfig settings, found 'fast'$"),
        ({"runner": {"threads": 0}}, r"^runner\.threads: expected a number >= 1, found 0$"),
    ],
)
def test_config_values_are_type_and_range_checked(data, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(data)


def _amp_runner(tmp_path, data_dir, style_weight: float) -> tuple[OnPolicyRunner, list[torch.Tensor]]:
    """A tiny ``tracking_ppo_amp`` run on the walk and the task rewards its env hands out (recorded per step)."""
    cfg = load_config("tracking_ppo_amp")
    cfg.runner.num_steps_per_env, cfg.runner.logger, cfg.runner.time_budget_s = 8, "none", None
    cfg.runner.eval_interval = 0
    cfg.env.num_envs = 4
    cfg.env.motions = [str(data_dir / "motions/humanoid28/humanoid_walk.npz")]
    cfg.actor.update(hidden_dims=[32])
    cfg.critic.update(hidden_dims=[32])
    cfg.algorithm["amp_cfg"]["style_weight"] = style_weight
    runner = OnPolicyRunner(cfg, log_dir=tmp_path / f"w{style_weight}")
    task: list[torch.Tensor] = []
    step = runner.env.step

    def recording(actions):
        out = step(actions)
        task.append(out[1].detach().clone().reshape(-1))
        return out

    runner.env.step = recording
    return runner, task


def test_runner_trains_with_the_amp_config_and_the_style_reward_reaches_the_returns(tmp_path, data_dir):
    """The same seed with style weight 0.5 and 0: the first rollouts act alike (the same networks and draws), the
    stored rewards differ by 0.5 x the style reward (in [0, 1], LSGAN's), and the returns by its GAE-discounted sum
    (computed here independently: values and dones are the same in both runs, so they cancel)."""
    runs, outs = {}, {}
    for w in (0.5, 0.0):  # one after the other: a runner seeds the global generators when it is built
        runs[w] = _amp_runner(tmp_path, data_dir, w)
        outs[w] = runs[w][0].learn(1)
    assert {"loss/amp_loss", "loss/amp_grad_penalty", "amp_style_reward"} <= set(outs[0.5])
    data = {w: runner.alg.storage.get() for w, (runner, _) in runs.items()}
    assert runs[0.5][0].alg.amp is not None and "amp" in data[0.5]["obs"].keys()
    torch.testing.assert_close(data[0.5]["actions"], data[0.0]["actions"], rtol=0, atol=0)
    task = torch.stack(runs[0.0][1])  # [T, N]
    torch.testing.assert_close(torch.stack(runs[0.5][1]), task, rtol=0, atol=0)
    rewards = {w: d["rewards"].reshape(task.shape) for w, d in data.items()}
    torch.testing.assert_close(rewards[0.0], task)  # style weight 0: the task reward alone
    style = (rewards[0.5] - task) / 0.5
    assert float(style.min()) >= -1e-6 and float(style.max()) <= 1 + 1e-6 and float(style.mean()) > 0.05
    assert float(style.mean()) == pytest.approx(outs[0.5]["amp_style_reward"], rel=1e-3)
    gamma, lam = (runs[0.5][0].cfg.algorithm[k] for k in ("gamma", "lam"))
    dones = data[0.5]["dones"].reshape(task.shape).float()
    expected, carry = torch.zeros_like(task), torch.zeros(task.shape[1])
    for t in reversed(range(task.shape[0])):  # GAE is linear in the rewards: returns move by the discounted sum
        carry = 0.5 * style[t] + gamma * lam * (1 - dones[t]) * carry
        expected[t] = carry
    moved = (data[0.5]["returns"] - data[0.0]["returns"]).reshape(task.shape)
    torch.testing.assert_close(moved, expected, rtol=1e-4, atol=1e-5)
    assert float(moved.abs().mean()) > 0.1
