"""A policy a robot can run: deployable observations with sensor noise, latency and action delay, the deploy
distillation config, the export contract (robot.mjb, reference.npz, policy_baked.onnx) and tools/sim2sim.py without
torch, checked against the env and `mimic-rl eval`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_runner import small_cfg

from mimic_rl.cli import main
from mimic_rl.config import CONFIG_DIR, DistillConfig, load_config
from mimic_rl.envs.common.sensor_model import ActionDelay, SensorChannels
from mimic_rl.envs.mujoco import MujocoTrackingEnv
from mimic_rl.envs.mujoco.physics import BatchedPhysics, DomainRandomization
from mimic_rl.envs.mujoco.robots import build_model, robot_config
from mimic_rl.export.contract import noise_free
from mimic_rl.runners import OnPolicyRunner, load_checkpoint
from mimic_rl.tasks.tracking import DEPLOYABLE_TERMS, DeployObservations, SensorModel, observation_terms

ROOT = Path(__file__).resolve().parents[1]
NO_INIT_NOISE = "env.init_noise={joint_pos: 0, root_pos: 0, root_rot: 0, velocity: 0}"


def student_terms(obs_groups: dict) -> list[str]:
    """The observation terms a student with ``obs_groups`` reads (its actor groups and its reference)."""
    table = observation_terms(deployable=True)
    groups = [*list(obs_groups.get("actor") or ["policy"]), obs_groups.get("actor_reference") or "reference"]
    return [term.name for group in groups for term in table[group]]


@pytest.fixture(scope="module")
def student(tmp_path_factory, data_dir):
    """A teacher trained one iteration, its deployable student (two iterations of distill_deploy) and the student's
    export with the walk clip baked in: ``(run folder, export folder)``."""
    folder = tmp_path_factory.mktemp("deploy")
    runner = OnPolicyRunner(small_cfg(data_dir), log_dir=folder / "teacher")
    runner.learn(1)
    runner.close()
    run, export = folder / "student", folder / "export"
    args = ["distill", "--teacher", str(folder / "teacher" / "model_1.pt"), "--task", "distill_deploy"]
    args += ["--num-envs", "4", "--iterations", "2", "--log-dir", str(run), "--logger", "none", "--no-eval"]
    assert main([*args, "--no-export", "--set", "student.hidden_dims=[32,32]"]) == 0
    assert main(["export", "--checkpoint", str(run / "model_2.pt"), "--output", str(export), "--bake-motion"]) == 0
    return run, export


def test_deploy_configs_give_the_student_deployable_terms_only(student):
    configs = sorted(CONFIG_DIR.glob("*deploy*.yaml"))
    assert configs
    for path in configs:
        cfg = load_config(str(path), DistillConfig)
        assert cfg.env.deploy.enabled is True, path
        names = student_terms(cfg.obs_groups)
        assert set(names) <= DEPLOYABLE_TERMS, (path, sorted(set(names) - DEPLOYABLE_TERMS))
    # the check can fail: the default student reads the world-frame linear velocity and the reference's positions
    assert {"anchor_lin_vel_b", "reference_frames"} <= set(student_terms({})) - DEPLOYABLE_TERMS
    run, export = student
    state = load_checkpoint(run / "model_2.pt")
    assert set(student_terms(state["obs_groups"])) <= DEPLOYABLE_TERMS
    contract = json.loads((export / "policy.json").read_text())["deploy"]
    assert contract["deployable"] is True and contract["privileged_terms"] == []
    terms = contract["inputs"]["policy"]["terms"]
    assert [t["name"] for t in terms] == ["joint_pos_rel", "joint_vel", "anchor_ang_vel_b", "projected_gravity",
                                          "last_action"]  # fmt: skip
    assert [t["offset"] for t in terms] == [0, 28, 56, 59, 62] and terms[0]["latency_steps"] == 1


def _blocked_python(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` with torch and mimic_rl unimportable (a meta path finder that refuses them)."""
    guard = (
        "import sys, runpy\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'mimic_rl', 'tensordict'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Refuse())\n"
        f"sys.argv = [{script!r}, *{list(args)!r}]\n"
        f"runpy.run_path({script!r}, run_name='__main__')\n"
        "assert not any(m.split('.')[0] in ('torch', 'mimic_rl') for m in sys.modules), 'torch was imported'\n"
    )
    return subprocess.run([sys.executable, "-c", guard], capture_output=True, text=True, timeout=300)


def test_sim2sim_runs_without_torch_and_matches_eval(student, tmp_path):
    run, export = student
    alone = tmp_path / "sim2sim.py"
    shutil.copy(ROOT / "tools" / "sim2sim.py", alone)  # copied alone
    out = tmp_path / "sim2sim.json"
    done = _blocked_python(str(alone), str(export), "--no-noise", "--output", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "global MPJPE" in done.stdout
    sim = json.loads(out.read_text())["summary"]
    evaluation = tmp_path / "eval.json"
    args = ["eval", "--checkpoint", str(run / "model_2.pt"), "--output", str(evaluation), "--num-envs", "1"]
    assert main([*args, "--set", "env.deploy.noise=false", "--set", NO_INIT_NOISE]) == 0
    ev = json.loads(evaluation.read_text())["summary"]
    assert sim["success"] == ev["success_rate"]
    for key in ("global_mpjpe_mm", "root_mpjpe_mm", "episode_length_fraction"):
        assert sim[key] == pytest.approx(ev[key], rel=0.05), key
    helped = subprocess.run([sys.executable, str(alone), "--help"], capture_output=True, text=True)
    assert "success" in helped.stdout and "root-relative MPJPE" in helped.stdout
    bad = subprocess.run([sys.executable, str(alone), str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "expected an export file" in bad.stderr


def _env_of(run: Path, latency: bool) -> MujocoTrackingEnv:
    """One noise-free env of the student's config, at the clip's first frame."""
    cfg = load_config(load_checkpoint(run / "model_2.pt")["config"], DistillConfig)
    env_cfg = noise_free(cfg.env)
    env_cfg.deploy.noise, env_cfg.deploy.latency = False, latency
    return MujocoTrackingEnv(env_cfg)


def _sim2sim():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sim2sim
    finally:
        sys.path.pop(0)
    return sim2sim


def test_the_runner_builds_the_env_observation_from_sensors(student):
    run, export = student
    sim2sim = _sim2sim()
    contract = sim2sim.Contract(export)
    builder = sim2sim.ObservationBuilder(contract, contract.model(), noise=False, latency=True)
    env = _env_of(run, latency=True)
    g = torch.Generator().manual_seed(0)
    try:
        obs = env.get_observations()
        for step in range(12):
            sensors = env.physics.sensordata[0].copy()
            policy, reference = builder(sensors, step, env.last_actions[0].numpy(), restart=step == 0)
            np.testing.assert_allclose(policy, obs["deploy_policy"][0].numpy(), atol=1e-5)
            np.testing.assert_allclose(reference, obs["deploy_reference"][0].numpy(), atol=1e-5)
            obs, _, dones, _ = env.step(0.3 * torch.randn(1, env.num_actions, generator=g))
            assert not bool(dones[0])
    finally:
        env.close()


def test_the_baked_onnx_reproduces_the_reference_command(student):
    import onnxruntime as ort

    run, export = student
    baked = ort.InferenceSession(str(export / "policy_baked.onnx"), providers=["CPUExecutionProvider"])
    plain = ort.InferenceSession(str(export / "policy.onnx"), providers=["CPUExecutionProvider"])
    table = np.load(export / "reference.npz")
    env = _env_of(run, latency=False)
    anchor = env.tracked.index(env.robot.anchor_body)
    state = {i.name: np.zeros((i.shape[0], 1, i.shape[2]), np.float32) for i in baked.get_inputs()[3:]}
    assert list(state) == ["hidden", "cell"]  # the default student is an LSTM: its state goes in and out
    plain_state = dict(state)
    try:
        obs = env.get_observations()
        for step in range(0, 10):
            policy = obs["deploy_policy"].numpy()
            quat = env.robot_state().body_quat_w[:, anchor].numpy()
            feed = {"policy": policy, "time_step": np.array([step]), "anchor_quat_w": quat, **state}
            actions, reference, target, *after = baked.run(None, feed)
            state = dict(zip(state, after))
            np.testing.assert_allclose(reference, obs["deploy_reference"].numpy(), atol=1e-5)
            feed = {"policy": policy, "reference": reference, "reference_mask": np.ones(1, dtype=bool), **plain_state}
            expected, *after = plain.run(["actions", "hidden_out", "cell_out"], feed)
            plain_state = dict(zip(plain_state, after))
            np.testing.assert_allclose(actions, expected, atol=1e-5)
            np.testing.assert_allclose(target, table["action_offset"][step] + table["action_scale"] * actions, 1e-6)
            obs, *_ = env.step(torch.from_numpy(actions))
    finally:
        env.close()


def test_a_teacher_export_bakes_its_clip_and_the_runner_reads_its_privileged_terms(tmp_path, student):
    run, _ = student
    teacher, out = run.parent / "teacher" / "model_1.pt", tmp_path / "teacher"
    assert main(["export", "--checkpoint", str(teacher), "--output", str(out), "--bake-motion"]) == 0
    assert (out / "reference.npz").is_file() and not (out / "policy_baked.onnx").exists()  # no IMU-only graph
    contract = json.loads((out / "policy.json").read_text())["deploy"]
    assert contract["deployable"] is False
    assert contract["privileged_terms"] == ["anchor_lin_vel_b", "reference_frames"]
    sim2sim = _sim2sim()
    exported = sim2sim.Contract(out)
    builder = sim2sim.ObservationBuilder(exported, exported.model(), noise=True, latency=True)
    cfg = load_config(load_checkpoint(teacher)["config"])
    env = MujocoTrackingEnv(noise_free(cfg.env))
    try:
        obs = env.get_observations()
        for step in range(4):
            policy, reference = builder(env.physics.sensordata[0].copy(), step, env.last_actions[0].numpy(), step == 0)
            np.testing.assert_allclose(policy, obs["policy"][0].numpy(), atol=1e-5)
            np.testing.assert_allclose(reference, obs["reference"][0].numpy(), atol=1e-5)
            obs, *_ = env.step(torch.full((1, env.num_actions), 0.1))
    finally:
        env.close()


def test_sensor_latency_and_noise_by_hand():
    cfg = DeployObservations(enabled=True, joint_pos=SensorModel(0.0, 2), joint_vel=SensorModel(0.1, 0),
                             ang_vel=SensorModel(), gravity=SensorModel(), anchor_ori=SensorModel())  # fmt: skip
    channels = SensorChannels(cfg, num_joints=2, num_actions=2, num_envs=2, device="cpu", seed=0)

    def groups(v: float) -> dict:
        return {"deploy_policy": torch.full((2, 12), v), "deploy_reference": torch.full((2, 3, 10), v)}

    seen = [channels(groups(1.0), None)]
    seen += [channels(groups(v), torch.tensor([], dtype=torch.long)) for v in (2.0, 3.0, 4.0)]
    seen.append(channels(groups(5.0), torch.tensor([0])))
    assert [float(s["deploy_policy"][1, 0]) for s in seen] == [1.0, 1.0, 1.0, 2.0, 3.0]  # joint_pos 2 steps late
    assert float(seen[-1]["deploy_policy"][0, 0]) == 5.0  # a restarted env: no reading of its last episode
    vel = torch.stack([s["deploy_policy"][:, 2:4] for s in seen])
    exact = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]).view(-1, 1, 1)
    assert 0 < float((vel - exact).abs().max()) <= 0.1  # joint_vel: noise only
    assert all(torch.equal(s["deploy_policy"][:, 4:], groups(v)["deploy_policy"][:, 4:])
               for s, v in zip(seen, (1.0, 2.0, 3.0, 4.0, 5.0)))  # fmt: skip
    off = SensorChannels(DeployObservations(enabled=True, noise=False, latency=False), 2, 2, 2, "cpu", 0)
    assert torch.equal(off(groups(3.0), None)["deploy_policy"], groups(3.0)["deploy_policy"])


def test_action_delay_by_hand():
    delay = ActionDelay(2, num_envs=1, num_actions=1, device="cpu")
    applied = [float(delay(torch.tensor([[a]]))) for a in (1.0, 2.0, 3.0, 4.0)]
    assert applied == [1.0, 1.0, 1.0, 2.0]
    delay.restart()
    assert float(delay(torch.tensor([[9.0]]))) == 9.0
    assert float(ActionDelay(0, 1, 1, "cpu")(torch.tensor([[7.0]]))) == 7.0


def test_link_mass_randomization_is_its_own_switch():
    model, _, _ = build_model(robot_config("humanoid28"))
    on = BatchedPhysics(model, 2, 1, DomainRandomization(link_masses=True, num_model_variants=4), seed=0)
    ratios = np.stack([v.body_mass[1:] / model.body_mass[1:] for v in on.variants[1:]])
    assert ratios.min() >= 0.9 - 1e-9 and ratios.max() <= 1.1 + 1e-9 and ratios.std() > 0.01
    inertia = np.stack([v.body_inertia[1:, 0] / model.body_inertia[1:, 0] for v in on.variants[1:]])
    np.testing.assert_allclose(inertia, ratios, rtol=1e-9)
    default = BatchedPhysics(model, 2, 1, DomainRandomization(num_model_variants=4), seed=0)
    assert all(np.array_equal(v.body_mass, model.body_mass) for v in default.variants)
    same_draws = BatchedPhysics(model, 2, 1, DomainRandomization(num_model_variants=4, link_masses=True), seed=0)
    assert default.variants[1].geom_friction[0, 0] == same_draws.variants[1].geom_friction[0, 0]  # drawn first


def test_noise_latency_and_delay_resume_exactly(data_dir):
    cfg = load_config("tracking_ppo").env
    cfg.num_envs, cfg.motions = 4, [str(data_dir / "motions/humanoid28/humanoid_walk.npz")]
    cfg.deploy = DeployObservations(enabled=True, action_delay_steps=1)
    g = torch.Generator().manual_seed(1)
    actions = [0.3 * torch.randn(4, 28, generator=g) for _ in range(10)]
    first, second = MujocoTrackingEnv(cfg), MujocoTrackingEnv(cfg)
    try:
        for a in actions[:5]:
            first.step(a)
        second.load_state_dict(first.state_dict())
        for a in actions[5:]:
            one, two = first.step(a)[0], second.step(a)[0]
            assert torch.equal(one["deploy_policy"], two["deploy_policy"])
            assert torch.equal(one["deploy_reference"], two["deploy_reference"])
        assert not torch.equal(one["deploy_policy"], one["policy"][:, [i for i in range(93) if not 56 <= i < 59]])
    finally:
        first.close()
        second.close()


def test_eval_set_mistakes_are_one_line(student, tmp_path, capsys):
    run, _ = student
    args = ["eval", "--checkpoint", str(run / "model_2.pt"), "--output", str(tmp_path / "e.json")]
    for override, message in (
        ("algorithm.learning_rate=1", "expected an env.* key here"),
        ("env.deploy.nois=false", "did you mean env.deploy.noise?"),
    ):
        assert main([*args, "--set", override]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "e.json").exists()


def test_a_recurrent_student_exports_baked_and_sim2sim_carries_its_state(student, tmp_path):
    """The default student is an LSTM: ``--bake-motion`` exports its state inputs and outputs in both graphs, and the
    runner feeds each step's ``hidden_out``/``cell_out`` back (zeros at the start), matching ``mimic-rl eval`` to 1e-4
    with noise off. The control, a runner that restarts the state at every step, misses that (0.1 % off on such a
    policy)."""
    run, export = student
    import onnxruntime as ort

    baked = ort.InferenceSession(str(export / "policy_baked.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in baked.get_inputs()][-2:] == ["hidden", "cell"]
    assert [o.name for o in baked.get_outputs()][-2:] == ["hidden_out", "cell_out"]
    evaluation = tmp_path / "eval.json"
    args = ["eval", "--checkpoint", str(run / "model_2.pt"), "--output", str(evaluation), "--num-envs", "1"]
    assert main([*args, "--set", "env.deploy.noise=false", "--set", NO_INIT_NOISE]) == 0
    ev = json.loads(evaluation.read_text())["summary"]
    sim2sim = _sim2sim()
    carried = sim2sim.run(export, noise=False, latency=True)
    keys = ("global_mpjpe_mm", "root_mpjpe_mm")
    assert carried["success"] == ev["success_rate"]
    assert carried["episode_length_fraction"] == pytest.approx(ev["episode_length_fraction"], rel=1e-6)
    for key in keys:
        assert carried[key] == pytest.approx(ev[key], rel=1e-4), key
    session = sim2sim.Contract.session

    def forgetful(contract):
        inner = session(contract)

        class Forgetful:
            get_inputs = inner.get_inputs

            def run(self, names, feed):
                zeroed = {k: np.zeros_like(v) if k in ("hidden", "cell") else v for k, v in feed.items()}
                return inner.run(names, zeroed)

        return Forgetful()

    sim2sim.Contract.session = forgetful
    try:
        restarted = sim2sim.run(export, noise=False, latency=True)
    finally:
        sim2sim.Contract.session = session
    assert any(restarted[key] != pytest.approx(ev[key], rel=1e-4) for key in keys)


def test_a_distillation_resumes_from_its_folder_with_its_own_teacher_and_config(student, tmp_path):
    """``mimic-rl distill --resume --log-dir RUN`` (no ``--teacher``, no ``--task``) continues the run: the teacher
    and the config (here the recurrent student of ``distill_deploy`` with 32-unit layers) come from its config.yaml."""
    run = tmp_path / "run"
    shutil.copytree(student[0], run)
    before = load_checkpoint(run / "model_2.pt")
    argv = ["distill", "--resume", "--log-dir", str(run), "--iterations", "1", "--no-eval", "--no-export"]
    assert main([*argv, "--logger", "none"]) == 0
    after = load_checkpoint(run / "model_3.pt")
    assert after["config"]["teacher"] == before["config"]["teacher"]
    assert after["config"]["student"] == before["config"]["student"]
    assert after["config"]["student"]["rnn_type"] == "lstm" and after["config"]["student"]["hidden_dims"] == [32, 32]
    assert main(["distill", "--log-dir", str(tmp_path / "fresh"), "--no-eval"]) == 2  # a new run needs its teacher
    assert not (tmp_path / "fresh").exists()
