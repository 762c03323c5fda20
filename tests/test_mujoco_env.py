"""The embedded MuJoCo backend: the humanoid28 model, the tracking env's contract, terminations, determinism, G1."""

from __future__ import annotations

import types

import mujoco
import numpy as np
import pytest
import torch

from mimic_rl.envs import VecEnv
from mimic_rl.envs.mujoco import DomainRandomization, InitNoise, MujocoTrackingEnv, TrackingEnvConfig
from mimic_rl.envs.mujoco.robots import humanoid28_config, servo_kv_over_kp
from mimic_rl.export.contract import bake_reference
from mimic_rl.motion import (
    MotionLibrary,
    RobotKinematics,
    SyntheticMotionConfig,
    load_motion,
    save_motion,
    synthetic_clip,
)

H28 = ["humanoid_walk", "humanoid_run", "humanoid_dance"]
CALM = {"init_noise": InitNoise(0.0, 0.0, 0.0, 0.0), "randomization": DomainRandomization(enabled=False)}


@pytest.mark.parametrize("name", H28)
def test_humanoid28_model_driven_by_the_converted_clip_reproduces_body_positions(data_dir, name):
    cfg = humanoid28_config()
    path = data_dir / f"motions/humanoid28/{name}.npz"
    original = load_motion(path)  # Isaac Lab's rotation-vector convention
    converted = cfg.load_clip(path)  # the model's hinge convention
    model = mujoco.MjModel.from_xml_path(cfg.mjcf)
    data = mujoco.MjData(model)
    assert [model.body(i).name for i in range(1, model.nbody)] == original.body_names
    assert [model.joint(i).name for i in range(1, model.njnt)] == original.joint_names
    worst = 0.0
    for t in range(original.num_frames):  # plain MuJoCo FK, independent of the converter's
        data.qpos[:3] = original.body_pos_w[t, 0]
        data.qpos[3:7] = original.body_quat_w[t, 0]
        data.qpos[7:] = converted.joint_pos[t]
        mujoco.mj_kinematics(model, data)
        worst = max(worst, float(np.linalg.norm(data.xpos[1:] - original.body_pos_w[t], axis=-1).max()))
    assert worst < 0.02, worst
    assert worst < 1e-3  # in fact the skeleton is exact (offsets derived from the clips)
    assert 50 < model.body_subtreemass[1] < 70


def test_a_humanoid_amp_clip_saved_by_convert_is_converted_again_when_loaded(data_dir, tmp_path):
    """``mimic-rl convert`` keeps Isaac Lab's rotation-vector joints (with the joint names of the model's hinges): a
    saved copy must be converted as the original is, not read as hinge angles (up to 0.15 rad apart on the run)."""
    cfg = humanoid28_config()
    path = data_dir / "motions/humanoid28/humanoid_run.npz"
    direct = cfg.load_clip(path)
    copy = cfg.load_clip(save_motion(load_motion(path), tmp_path / "run.npz"))
    assert copy.metadata["converted_from"] == "isaaclab_amp"
    np.testing.assert_allclose(copy.joint_pos, direct.joint_pos, atol=1e-6)
    np.testing.assert_allclose(copy.body_pos_w, direct.body_pos_w, atol=1e-5)
    hinge = cfg.load_clip(save_motion(direct, tmp_path / "hinge.npz"))  # a converted clip stays as it is
    assert "converted_from" not in hinge.metadata and "joint_convention" not in direct.metadata
    np.testing.assert_array_equal(hinge.joint_pos, direct.joint_pos)


def _env(data_dir, **kwargs):
    cfg = TrackingEnvConfig(num_envs=8, motions=[str(data_dir / "motions/humanoid28/humanoid_walk.npz")], **kwargs)
    return MujocoTrackingEnv(cfg)


def test_observation_groups_follow_the_contract(data_dir):
    env = _env(data_dir, num_future_frames=3)
    assert isinstance(env, VecEnv)
    obs = env.get_observations()
    J, A, B = 28, env.num_actions, len(env.tracked)
    assert A == J and env.max_episode_length == 500 and env.episode_length_buf.shape == (8,)
    assert obs["policy"].shape == (8, 2 * J + 9 + A)
    assert obs["reference"].shape == (8, 3, 2 * J + 9) and "critic_reference" not in obs.keys()  # stored once
    assert obs["critic"].shape == (8, 2 * J + 9 + A + 9 * B + 1) and obs["amp"].shape == (8, 2 * J)
    mask = obs["reference_mask"]
    assert mask.dtype == torch.bool and mask.shape == (8,) and bool(mask.all())
    for key in ("policy", "reference", "critic", "amp"):
        assert obs[key].dtype == torch.float32 and bool(torch.isfinite(obs[key]).all())
    o, r, d, extras = env.step(torch.zeros(8, A))
    assert r.shape == (8,) and d.dtype == torch.bool and extras["time_outs"].dtype == torch.bool
    assert set(extras["final_observations"].keys()) == set(o.keys())
    assert {"reward/body_pos", "termination/anchor_height", "metrics/global_mpjpe_mm"} <= set(extras["log"])


@pytest.mark.parametrize("mode,tolerance", [("start", 1e-4), ("uniform", 5e-3)])
def test_reference_state_init_gives_zero_tracking_error(data_dir, mode, tolerance):
    env = _env(data_dir, sampling_mode=mode, **CALM)
    clips, times = env.clip_ids, env.obs_time
    ref = env.library.state(clips, times)
    robot = env.robot_state()
    err = (robot.body_pos_w - ref.body_pos_w[:, env._ref_tracked]).norm(dim=-1)
    # exact at frame times; between frames the library lerps body positions, which is not the FK of lerped joints
    assert float(err.max()) < tolerance  # metres
    torch.testing.assert_close(robot.joint_pos, ref.joint_pos, atol=1e-5, rtol=0)
    # the reference group's first frame is the reference itself: joint positions and the anchor at the robot
    obs = env.get_observations()
    torch.testing.assert_close(obs["reference"][:, 0, :28], ref.joint_pos, atol=1e-6, rtol=0)
    assert float(obs["reference"][:, 0, 56:59].abs().max()) < 1e-4


def _standing_env(data_dir, **kwargs):
    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = synthetic_clip(kin, SyntheticMotionConfig(duration=4.0, fps=50.0, amplitude=0.0))  # all joints at 0
    cfg = TrackingEnvConfig(num_envs=4, sampling_mode="start", **{**CALM, **kwargs})
    return MujocoTrackingEnv(cfg, clips=[clip])


def test_holding_the_reference_pose_with_zero_action_stands_for_a_second(data_dir):
    env = _standing_env(data_dir)
    h0 = env.robot_state().body_pos_w[:, 0, 2].clone()
    for _ in range(50):  # 1 s at 50 Hz
        obs, _, dones, _ = env.step(torch.zeros(4, env.num_actions))
        assert not bool(dones.any())
        assert all(bool(torch.isfinite(v).all()) for k, v in obs.items() if v.is_floating_point())
    h = env.robot_state().body_pos_w[:, 0, 2]
    assert bool(((h - h0).abs() < 0.05).all()), (h0, h)
    assert float(env.metrics.summary()["global_mpjpe_mm"]) < 30.0


def test_from_the_walks_first_frame_the_robot_moves_with_its_reference(data_dir):
    """Reference-state initialization at the first frame of the real walk (1.6 m/s) starts the robot at the walk's
    speed: with feed-forward tracking (zero residual action) its pelvis stays within 15 cm of the reference's for
    0.2 s (0.11 m measured). Read as a 60 fps clip with every frame twice, the first frame was at rest, and the robot
    fell 0.32 m behind in the same time."""
    env = _env(data_dir, sampling_mode="start", action_offset="reference", **CALM)
    lag = []
    for _ in range(10):  # 0.2 s
        _, _, dones, _ = env.step(torch.zeros(8, env.num_actions))
        assert not bool(dones.any())
        ref = env.library.state(env.clip_ids, env.obs_time, [0]).body_pos_w[:, 0]
        lag.append(float((env.robot_state().body_pos_w[:, 0] - ref).norm(dim=-1).max()))
    assert max(lag) < 0.15, lag


def test_time_outs_at_the_episode_limit(data_dir):
    env = _standing_env(data_dir, episode_length_s=0.2)  # 10 policy steps
    for step in range(1, 11):
        obs, _, dones, extras = env.step(torch.zeros(4, env.num_actions))
        assert bool(dones.all()) == (step == 10) and bool(extras["time_outs"].all()) == (step == 10)
    assert bool((env.episode_length_buf == 0).all())
    final = extras["final_observations"]
    assert not torch.equal(final["policy"], obs["policy"])  # pre-reset observations differ from the fresh ones


@pytest.mark.parametrize("case", ["anchor_height", "anchor_tilt", "ee_height"])
def test_each_termination_fires_on_a_constructed_case(data_dir, case):
    env = _standing_env(data_dir)
    state = env.physics.state
    qpos = state[:, env.physics.qpos_slice]
    if case == "anchor_height":
        qpos[0, 2] -= 0.5
    elif case == "anchor_tilt":
        qpos[0, 3:7] = [np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0]  # rolled 90 degrees
    else:  # lift the right foot (an end effector)
        qpos[0, 7 + env.joint_names.index("right_hip_y")] = -1.5
        qpos[0, 7 + env.joint_names.index("right_knee")] = 2.0
    env.physics.state[:, env.physics.qpos_slice] = qpos
    _, _, dones, extras = env.step(torch.zeros(4, env.num_actions))
    assert bool(dones[0]) and not bool(dones[1:].any()) and not bool(extras["time_outs"][0])
    assert float(extras["log"][f"termination/{case}"]) == pytest.approx(0.25)  # one env of four


def test_one_and_two_physics_threads_give_identical_rollouts(data_dir):
    runs = []
    for threads in (1, 2):
        cfg = TrackingEnvConfig(
            num_envs=6, num_threads=threads, seed=3, motions=[str(data_dir / "motions/humanoid28/humanoid_run.npz")]
        )
        env = MujocoTrackingEnv(cfg)
        g = torch.Generator().manual_seed(0)
        out = []
        for _ in range(30):  # with domain randomization, pushes and resets
            obs, rew, dones, _ = env.step(0.3 * torch.randn(6, env.num_actions, generator=g))
            out.append((obs["critic"].clone(), rew.clone(), dones.clone()))
        env.close()
        runs.append(out)
    for (o1, r1, d1), (o2, r2, d2) in zip(*runs):
        assert torch.equal(o1, o2) and torch.equal(r1, r2) and torch.equal(d1, d2)


def test_g1_from_the_csv_resets_and_steps_with_finite_observations(data_dir):
    cfg = TrackingEnvConfig(
        num_envs=4,
        robot="g1",
        robot_mjcf=str(data_dir / "robots/unitree_g1/g1.xml"),
        motions=[str(data_dir / "motions/g1/B_HandsUp.csv")],
        csv_fps=60.0,
    )
    env = MujocoTrackingEnv(cfg)
    assert env.num_actions == 29 and env.tracked[0] == "pelvis"
    for _ in range(20):
        obs, rew, _, _ = env.step(torch.zeros(4, 29))
        for key, value in obs.items():
            assert bool(torch.isfinite(value.float()).all()), key
        assert bool(torch.isfinite(rew).all())
    env.reset()
    assert bool((env.episode_length_buf == 0).all())


def test_each_robot_has_its_own_default_action_scale_and_the_config_overrides_it(data_dir):
    """humanoid28: 0.3 x its 0.5 rad per unit; the G1: BeyondMimic's 0.25 x effort limit / kp, so kp x scale is a
    quarter of Unitree's effort limits (hip pitch 88, knee 139, ankle pitch 50 N·m); a set factor wins for both."""
    assert _env(data_dir).action_scale.tolist() == pytest.approx([0.15] * 28)
    assert _env(data_dir, action_scale_factor=1.0).action_scale.tolist() == pytest.approx([0.5] * 28)
    g1 = {"robot": "g1", "robot_mjcf": str(data_dir / "robots/unitree_g1/g1.xml"), "csv_fps": 60.0}
    g1["motions"] = [str(data_dir / "motions/g1/B_HandsUp.csv")]
    for factor in (None, 0.3):
        env = MujocoTrackingEnv(TrackingEnvConfig(num_envs=2, action_scale_factor=factor, **g1))
        torque = {
            env.model.actuator(i).name: env.model.actuator_gainprm[i, 0] * float(env.action_scale[i])
            for i in range(env.model.nu)
        }
        expected = {"left_hip_pitch_joint": 22.0, "right_knee_joint": 34.75, "left_ankle_pitch_joint": 12.5}
        for name, value in expected.items():
            key = next(k for k in torque if k.startswith(name))
            assert torque[key] == pytest.approx(value * (factor or 1.0), rel=1e-3), (key, torque[key])


def test_rendering_writes_a_gif_or_says_why_not(data_dir, tmp_path):
    from mimic_rl.envs.mujoco.render import RenderingUnavailable, render_rollout

    env = _standing_env(data_dir)
    try:
        path = render_rollout(env, tmp_path / "rollout.gif", steps=5, width=64, height=48)
    except RenderingUnavailable as exc:
        assert "MUJOCO_GL" in str(exc)
        pytest.skip(f"no OpenGL backend here: {exc}")
    from PIL import Image

    with Image.open(path) as image:
        assert image.n_frames == 5 and image.size == (128, 48)  # robot and reference side by side


def test_rendering_writes_a_labelled_mp4_whose_camera_follows_the_robot(data_dir, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2 as imageio

    from mimic_rl.envs.mujoco.render import RenderingUnavailable, render_rollout

    env = _env(data_dir, sampling_mode="start", action_offset="reference")
    lookats = []
    from mimic_rl.envs.mujoco import render

    follow = render._follow
    render._follow = lambda camera, data: (follow(camera, data), lookats.append(camera.lookat.copy()))
    try:
        path = render_rollout(env, tmp_path / "rollout.mp4", steps=30, width=160, height=120)
    except RenderingUnavailable as exc:
        pytest.skip(f"no OpenGL backend here: {exc}")
    finally:
        render._follow = follow
    frames = imageio.mimread(path)
    assert len(frames) == 30 and frames[0].shape == (120, 320, 3)
    assert frames[0][2:12, 2:60].max() > 200  # the white label of the robot panel
    robot, reference = np.array(lookats[0::2]), np.array(lookats[1::2])  # the panels alternate
    assert np.linalg.norm(reference[:, :2] - reference[0, :2], axis=1).max() > 0.3  # the walk moves, its camera too
    assert np.abs(robot - reference).max() > 1e-3  # each panel follows its own body


def test_rendering_hands_each_steps_dones_to_on_dones(data_dir, tmp_path, monkeypatch):
    """So that ``mimic-rl play --video`` resets a recurrent policy's state per episode (drawn without OpenGL here)."""
    from mimic_rl.envs.mujoco import render

    class Blank:
        scene = types.SimpleNamespace(flags={})

        def update_scene(self, data, camera):
            pass

        def render(self):
            return np.zeros((8, 8, 3), np.uint8)

        def close(self):
            pass

    monkeypatch.setattr(render, "offscreen_renderer", lambda model, width, height: Blank())
    env = _env(data_dir, episode_length_s=0.1)  # episodes of 5 steps at most
    step, returned, seen = env.step, [], []

    def recorded_step(actions):
        out = step(actions)
        returned.append(out[2].clone())
        return out

    monkeypatch.setattr(env, "step", recorded_step)
    path = render.render_rollout(env, tmp_path / "r.gif", steps=12, on_dones=lambda d: seen.append(d.clone()))
    assert path.exists() and len(seen) == 12 and sum(int(d.sum()) for d in seen) >= 16  # every env ended twice
    assert all(torch.equal(a, b) for a, b in zip(seen, returned))


def test_reference_action_offset_targets_the_next_reference_pose(data_dir):
    def run(offset):
        env = _env(data_dir, action_offset=offset, sampling_mode="start", **CALM)
        if offset == "reference":
            expected = env.library.state(env.clip_ids, env.motion_time + env.step_dt).joint_pos
            torch.testing.assert_close(env._action_offset(), expected)
        errors = []
        for _ in range(10):  # 0.2 s of the walk with zero action
            _, _, _, extras = env.step(torch.zeros(8, env.num_actions))
            errors.append(extras["tracking"]["joint_pos_error"].mean())
        return float(torch.stack(errors).mean())

    residual, absolute = run("reference"), run("default")
    assert residual < 0.5 * absolute, (residual, absolute)  # zero residual action is feed-forward tracking
    with pytest.raises(ValueError, match="action_offset"):
        _env(data_dir, action_offset="previous")


def test_velocity_feedforward_adds_kv_over_kp_times_the_reference_velocity(data_dir):
    """humanoid28's servos all have kv / kp = 0.1 s (its MJCF's classes: 300/30, 60/6, 80/8, 150/15)."""
    model = mujoco.MjModel.from_xml_path(humanoid28_config().mjcf)
    np.testing.assert_allclose(servo_kv_over_kp(model), 0.1, rtol=1e-6)

    def run(feedforward):
        ff = {"action_offset": "reference", "reference_velocity_feedforward": feedforward}
        env = _env(data_dir, sampling_mode="start", **ff, **CALM)
        ahead = env.library.state(env.clip_ids, env.motion_time + env.step_dt)
        expected = ahead.joint_pos + (0.1 * ahead.joint_vel if feedforward else 0.0)
        torch.testing.assert_close(env._action_offset(), expected)
        errors = []
        for _ in range(10):  # 0.2 s of the walk with zero action: feed-forward tracking alone
            _, _, _, extras = env.step(torch.zeros(8, env.num_actions))
            errors.append(extras["tracking"]["joint_pos_error"].mean())
        return float(torch.stack(errors).mean())

    with_velocity, positions_only = run(True), run(False)
    env = _env(data_dir, sampling_mode="start", action_offset="reference", reference_velocity_feedforward=True, **CALM)
    baked = bake_reference(env)["action_offset"]  # what --bake-motion hands a robot: row n is for control step n
    times = (torch.arange(len(baked)) + 1) * env.step_dt
    ahead = env.library.state(torch.zeros(len(baked), dtype=torch.long), times)
    np.testing.assert_allclose(baked, (ahead.joint_pos + 0.1 * ahead.joint_vel).numpy(), atol=1e-5)  # float32 times
    assert with_velocity < 0.7 * positions_only, (with_velocity, positions_only)  # the servo no longer lags
    with pytest.raises(ValueError, match="action_offset: reference"):
        _env(data_dir, reference_velocity_feedforward=True)
    motor = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="j"/><geom size="0.1"/></body></worldbody>'
        '<actuator><motor name="m" joint="j"/></actuator></mujoco>'
    )
    with pytest.raises(ValueError, match=r"position actuators.*'m'"):
        servo_kv_over_kp(motor)


def _rollout(data_dir, steps: int, **kwargs) -> list[tuple]:
    cfg = TrackingEnvConfig(
        num_envs=6, seed=5, motions=[str(data_dir / "motions/humanoid28/humanoid_run.npz")], **kwargs
    )
    env = MujocoTrackingEnv(cfg)
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(steps):  # random actions: falls, resets, pushes
        obs, rew, dones, extras = env.step(0.5 * torch.randn(6, env.num_actions, generator=g))
        out.append((obs.clone(), rew.clone(), dones.clone(), extras["final_observations"].clone()))
    env.close()
    return out


def test_envs_that_do_not_reset_keep_their_pre_reset_observations(data_dir):
    resets = 0
    for obs, _, dones, final in _rollout(data_dir, 40):
        keep = ~dones
        resets += int(dones.sum())
        for key in ("policy", "reference", "critic", "amp"):
            assert torch.equal(obs[key][keep], final[key][keep])
            if bool(dones.any()):
                assert not torch.equal(obs[key][dones], final[key][dones]) or key == "amp"
    assert resets > 0


def test_the_step_feeds_the_adaptive_sampler_like_record_episode_ends(data_dir):
    """The env updates the sampler's EMAs (failures, exposure) inside its step; a replay through the library's own
    record/update of the same episode ends must give the same EMAs, and counted episodes must match the dones."""
    env = _env(data_dir, seed=2)
    replay = MotionLibrary(env.library.clips, device=env.device)
    g = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(40):
        clip_ids, motion_time = env.clip_ids.clone(), env.motion_time.clone()
        spans = (env.episode_length_buf + 1) * env.step_dt  # the steps of each episode, this one included
        _, _, dones, extras = env.step(0.8 * torch.randn(8, env.num_actions, generator=g))
        obs_time = (motion_time + env.step_dt) - env.sim_dt
        if bool(dones.any()):
            terminated = extras["tracking"]["terminated"]
            replay.record_episode_ends(clip_ids[dones], obs_time[dones], terminated[dones], spans[dones])
            ended += int(dones.sum())
            assert bool((env.episode_length_buf[dones] == 0).all())
    assert ended > 0 and float(replay.adaptive.failures.sum()) > 0 and float(replay.adaptive.exposure.sum()) > 0
    torch.testing.assert_close(env.library.adaptive.stats, replay.adaptive.stats, atol=1e-7, rtol=0)
    assert env.metrics.summary()["episodes"] == ended


def test_episode_ends_of_the_ending_envs_alone_equal_those_of_every_env(data_dir):
    """The eager step restarts only the envs that end (``env_ids``); their rows and bookkeeping must be exactly those
    that the fixed-shape version (every env, as compiled) gives them, and the other envs keep theirs."""
    env = _env(data_dir, seed=3)
    env.step(torch.zeros(8, env.num_actions))
    init, g = env._init, torch.Generator().manual_seed(5)
    dones = torch.tensor([True, False, False, True, True, False, False, True])
    terminated = dones & torch.tensor([True, False, False, False, True, False, False, True])
    draws = init.draws(8, g)
    args = (dones, terminated, env.clip_ids, env.obs_time, env.motion_time, env.episode_length_buf, env._push_timer)
    full = init.episode_ends(*args, env.library.adaptive.stats, draws)
    ids = dones.nonzero().squeeze(-1)
    part = init.episode_ends(*args, env.library.adaptive.stats, draws, env_ids=ids)
    assert part["rows"].shape == (4, full["rows"].shape[1])
    assert torch.equal(part["rows"], full["rows"][ids]) and torch.equal(part["sampler_stats"], full["sampler_stats"])
    for name, value in full["next"].items():
        assert torch.equal(part["next"][name], value), name
        assert torch.equal(value[~dones], getattr(env, name)[~dones]), name
    assert bool((full["next"]["episode_length_buf"][dones] == 0).all())


def test_compiled_mdp_step_matches_eager(data_dir, monkeypatch):
    """Two compiled envs of the same size but other constants (episode length) in one process: each keeps its own
    graphs (guards are skipped after warm-up) and matches eager, time-outs and resets included.

    The first, 3-step episodes (time-outs, falls and resets every few steps), is compiled as the env compiles
    (inductor, its options): this is the codegen check. The second, the default episode length, only has to show that
    it does not run the first one's graphs, which is the same for any backend: it is compiled with ``aot_eager``
    (dynamo's graphs, no code generation), which saves a second cold C++ compile (cold cache, alone: 301 s -> 177 s).
    Had it run the first one's graphs, its episodes would time out after 3 steps. (Removing ``_own_code``, with or
    without the guarded warm-up, did not make it do so: this half guards against a failure not seen so far.)"""
    real_compile = torch.compile

    def aot_eager(fn, dynamic=None, options=None):  # the env's call, without inductor's options
        return real_compile(fn, dynamic=dynamic, backend="aot_eager")

    resets = {}
    for name, kwargs in (("inductor", {"episode_length_s": 0.06}), ("aot_eager", {})):
        if name == "aot_eager":
            monkeypatch.setattr(torch, "compile", aot_eager)
        eager = _rollout(data_dir, 25, **kwargs)
        compiled = _rollout(data_dir, 25, compile=True, **kwargs)
        resets[name] = sum(int(d.sum()) for _, _, d, _ in eager)  # the comparison covers resets
        for (o1, r1, d1, f1), (o2, r2, d2, f2) in zip(eager, compiled):
            assert torch.equal(d1, d2)
            torch.testing.assert_close(r2, r1, atol=1e-5, rtol=1e-4)
            for key in ("policy", "reference", "critic"):
                torch.testing.assert_close(o2[key], o1[key], atol=1e-3, rtol=1e-3)
                torch.testing.assert_close(f2[key], f1[key], atol=1e-3, rtol=1e-3)
    assert 0 < resets["aot_eager"] < resets["inductor"]  # 3-step episodes: more resets, from the first env's constant


def test_compile_failure_falls_back_to_eager_with_a_warning(data_dir, monkeypatch):
    def broken_compile(fn, **kwargs):
        def call(*args):
            raise torch._dynamo.exc.BackendCompilerFailed(broken_compile, RuntimeError("no C++ compiler"), None)

        return call

    monkeypatch.setattr(torch, "compile", broken_compile)
    env = _env(data_dir, compile=True)
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler"):
        _, rew, _, _ = env.step(torch.zeros(8, env.num_actions))
    assert bool(torch.isfinite(rew).all())
