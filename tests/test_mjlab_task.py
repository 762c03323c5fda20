"""mimic_rl's own tracking task on mjlab (``MimicRL-Tracking-G1``, ``-AMP``): mjlab's scene, G1 and physics, this
package's motion library and tracking MDP. Built and stepped in-process (one env for the module), trained, resumed,
evaluated per clip and exported through the command line, AMP updated; bad input is one line. The comparison with
the embedded env is ``test_mjlab_consistency.py``.

Needs mjlab (``pip install -e ".[mjlab]"``, a virtual environment of its own); skipped without.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from mjlab_task_helpers import CSV_FPS, NUM_ENVS, cli, motions, shared_env

from mimic_rl.errors import MimicRLError
from mimic_rl.rotations import quat_angle_error, quat_apply_inverse
from mimic_rl.tasks.tracking import projected_gravity, reference_observation

pytest.importorskip("mjlab")

TASK = "MimicRL-Tracking-G1"


def _anchor(command) -> tuple[torch.Tensor, ...]:
    """The torso's pose (from its env's origin) and velocities, read from mjlab's entity by name."""
    data, i = command.robot.data, command.robot.body_names.index("torso_link")
    origin = command._env.scene.env_origins
    pose, vel = data.body_link_pose_w[:, i], data.body_link_vel_w[:, i]
    return pose[:, :3] - origin, pose[:, 3:7], vel[:, :3], vel[:, 3:]


def test_groups_shapes_and_step_extras(data_dir):
    env = shared_env(data_dir)
    command = env.mimic_command
    assert TASK in env.cfg.task and command.library.num_clips == 2 and env.num_actions == 29
    n, k = NUM_ENVS, 5
    shapes = {"policy": (n, 96), "reference": (n, k, 67), "critic": (n, 96 + 30 * 9 + 1), "amp": (n, 58)}
    shapes["reference_mask"] = (n,)  # the critic reads the actor's reference: one group, stored once
    actions = 0.3 * torch.randn(n, 29, generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        obs, rewards, dones, extras = env.step(actions)
    assert {key: tuple(value.shape) for key, value in obs.items()} == shapes
    assert obs["reference_mask"].dtype == torch.bool and bool(obs["reference_mask"].all())
    assert all(obs[g].dtype == torch.float32 for g in ("policy", "reference", "critic", "amp"))
    assert rewards.shape == (n,) and rewards.dtype == torch.float32 and dones.dtype == torch.bool
    assert set(extras) >= {"time_outs", "final_observations", "log", "tracking", "termination_terms"}
    assert set(extras["final_observations"].keys()) == set(shapes)
    result = command.step_result()
    torch.testing.assert_close(rewards, result["reward"] * env.step_dt)  # mjlab's reward manager scales by dt
    assert torch.equal(extras["time_outs"], result["time_outs"]) and torch.equal(
        dones, result["terminated"] | result["time_outs"]
    )
    assert set(extras["log"]) >= {
        "metrics/global_mpjpe_mm",
        "metrics/root_mpjpe_mm",
        "reward/total",
        "termination/anchor_position",
    }

    # the groups, recomputed from mjlab's entity data with the core functions, at the command's clip times
    pos, quat, lin, ang = _anchor(command)
    lib, data = command.library, command.robot.data
    future = lib.future_states(
        command.clip_ids, command.motion_time, torch.arange(k) * env.step_dt, [lib.body_names.index("torso_link")]
    )
    expected = reference_observation(
        future.joint_pos, future.joint_vel, future.body_pos_w[:, :, 0], future.body_quat_w[:, :, 0], pos, quat
    )
    torch.testing.assert_close(obs["reference"], expected, atol=1e-5, rtol=1e-5)
    assert lib.joint_names == list(command.robot.joint_names)  # the same order: no reordering to undo here
    policy = torch.cat(
        (
            data.joint_pos - data.default_joint_pos,
            data.joint_vel,
            quat_apply_inverse(quat, lin),
            quat_apply_inverse(quat, ang),
            projected_gravity(quat),
            torch.where(dones.unsqueeze(-1), 0.0, actions),  # a new episode has no last action
        ),
        dim=-1,
    )
    torch.testing.assert_close(obs["policy"], policy, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(obs["amp"], torch.cat((data.joint_pos, data.joint_vel), -1))


def test_restarts_are_reference_state_init(data_dir):
    """After a reset every env stands at its clip's reference state (random clip and time) within the init noise;
    with ``eval_clip`` every env starts at that clip's first frame, or env i at clip ``eval_clip[i]``'s (a tensor: an
    evaluation of several clips at once)."""
    env = shared_env(data_dir)
    command = env.mimic_command
    noise = command.cfg.init_noise
    per_env = torch.arange(NUM_ENVS) % 2
    for eval_clip in (None, per_env, 1):
        command.eval_clip = eval_clip
        env.reset()
        if eval_clip is not None:
            expected = per_env.tolist() if isinstance(eval_clip, torch.Tensor) else [eval_clip] * NUM_ENVS
            assert command.clip_ids.tolist() == expected and command.motion_time.tolist() == [0.0] * NUM_ENVS
        ref = command.library.state(command.clip_ids, command.motion_time, command._ref_tracked)
        robot = command.robot_state()
        root = command.tracked.index("pelvis")
        assert float((robot.body_pos_w[:, root] - ref.body_pos_w[:, root]).abs().max()) <= noise.root_pos + 1e-5
        assert (
            float(quat_angle_error(robot.body_quat_w[:, root], ref.body_quat_w[:, root]).max())
            <= 3**0.5 * noise.root_rot + 1e-4
        )
        assert float((robot.joint_pos - ref.joint_pos).abs().max()) <= noise.joint_pos + 1e-5
        assert float((robot.joint_vel - ref.joint_vel).abs().max()) <= noise.velocity + 1e-4
        assert float((robot.body_lin_vel_w[:, root] - ref.body_lin_vel_w[:, root]).abs().max()) <= noise.velocity + 1e-4
    command.eval_clip = None
    env.reset()


def test_a_clip_end_times_out_and_keeps_the_pre_reset_observations(data_dir):
    env = shared_env(data_dir)
    command = env.mimic_command
    command.eval_clip = 0
    env.reset()
    command.eval_clip = None
    duration = float(command.library.clip_duration[0])
    command.motion_time.fill_(duration - 1.5 * env.step_dt)  # the next step reaches the clip's last frame
    obs, _, dones, extras = env.step(torch.zeros(NUM_ENVS, 29))
    result = command.step_result()
    assert bool(dones.all()) and torch.equal(extras["time_outs"], ~result["terminated"])
    final = extras["final_observations"]
    for group in ("policy", "reference", "critic"):  # the real next state of the ended episodes, not the new ones
        torch.testing.assert_close(final[group], result["obs"][group])
        assert not torch.allclose(final[group], obs[group])
    assert extras["tracking"]["global_mpjpe_mm"].shape == (NUM_ENVS,) and extras["tracking"]["body_error_mm"].shape == (
        NUM_ENVS,
        30,
    )


def test_registry_settings_and_bad_input(tmp_path, data_dir):
    from mimic_rl.envs.mjlab import MjlabEnvConfig
    from mimic_rl.envs.mjlab.env import import_mjlab, mjlab_env_config
    from mimic_rl.tasks.tracking import TerminationConfig

    registry = import_mjlab()
    assert {TASK, f"{TASK}-AMP"} <= set(registry.list_tasks())
    play = registry.load_env_cfg(TASK, play=True)
    assert play.commands["motion"].sampling_mode == "start" and play.events == {} and "amp" not in play.observations
    cfg = MjlabEnvConfig(task=TASK, motions=motions(data_dir), csv_fps=CSV_FPS, num_future_frames=3)
    cfg.termination = TerminationConfig(anchor_position=0.3)
    command = mjlab_env_config(cfg).commands["motion"]
    assert command.num_future_frames == 3 and command.termination.anchor_position == 0.3 and command.csv_fps == 60
    bad = [
        (MjlabEnvConfig(task=TASK), "--motion: MimicRL-Tracking-G1 tracks motion files, found none"),
        (MjlabEnvConfig(task=TASK, motions=motions(data_dir)[:1]), "fps: a CSV carries no frame rate; pass --csv-fps"),
        (
            MjlabEnvConfig(motions=motions(data_dir)[1:], csv_fps=CSV_FPS),
            "env.csv_fps: applies to this package's tasks",
        ),
        (MjlabEnvConfig(task=TASK, motions=[str(data_dir / "motions" / "humanoid28" / "humanoid_walk.npz")]), "joint"),
    ]
    for cfg, message in bad:
        with pytest.raises(MimicRLError, match=message.replace("(", r"\(")), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the humanoid28 clip's held frames, said on reading it
            mjlab_env_config(cfg)
    csv = motions(data_dir)[0]
    result = cli("train", "--env", f"mjlab:{TASK}", "--motion", csv, "--log-dir", str(tmp_path / "bad"), timeout=300)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {csv}: fps: a CSV carries no frame rate")
    assert result.stderr.strip().count("\n") == 0, result.stderr


def test_train_resume_eval_export_through_the_cli(tmp_path, data_dir):
    run = tmp_path / "run"
    common = ["--env", f"mjlab:{TASK}", "--motion", *motions(data_dir), "--csv-fps", "60", "--num-envs", "4"]
    common += ["--log-dir", str(run), "--logger", "none"]
    result = cli("train", *common, "--iterations", "2", "--eval-envs", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    evaluation = json.loads((run / "eval.json").read_text())
    assert [c["name"] for c in evaluation["clips"]] == ["B_HandsUp", "B_Fence2"]  # every clip from its first frame
    hands_up = evaluation["clips"][0]
    assert (
        hands_up["num_envs"] == 2
        and hands_up["clip_steps"] == int(7.35 / 0.02)
        and len(hands_up["per_body_mpjpe_mm"]) == 30
    )
    for clip in evaluation["clips"]:
        assert 0.0 <= clip["success_rate"] <= 1.0 and clip["global_mpjpe_mm"] > 0 and clip["root_mpjpe_mm"] > 0
    assert evaluation["env"] == f"mjlab:{TASK}" and (run / "plots" / "success_per_clip.png").exists()
    logged = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"metrics/global_mpjpe_mm", "metrics/root_mpjpe_mm", "reward/body_pos", "episode/success_rate"} <= set(
        logged
    )
    result = cli("train", *common, "--iterations", "1", "--resume", "--no-eval")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resumed from" in result.stdout and (run / "model_3.pt").exists()
    state = torch.load(run / "model_3.pt", weights_only=True)
    assert state["env_state"]["adaptive_sampler"].shape == (2, 2, 11)  # failure and exposure EMAs, 2 clips, 1 s bins
    result = cli("export", "--checkpoint", str(run / "model_3.pt"), "--output", str(tmp_path / "export"))
    assert result.returncode == 0, result.stderr[-2000:]
    meta = json.loads((tmp_path / "export" / "policy.json").read_text())
    assert meta["inputs"]["policy"] == [96] and meta["inputs"]["reference"] == [5, 67]
    assert meta["simulator"] == f"mjlab:{TASK}"


def test_the_amp_variant_updates_a_discriminator_on_reference_pairs(tmp_path, data_dir):
    from mimic_rl.serialization import load_checkpoint

    run = tmp_path / "amp"
    args = ["--env", f"mjlab:{TASK}-AMP", "--task", "tracking_ppo_amp", "--motion", motions(data_dir)[1]]
    result = cli(
        "train", *args, "--num-envs", "4", "--iterations", "1", "--no-eval", "--logger", "none", "--log-dir", str(run)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    state = load_checkpoint(run / "model_1.pt")
    assert state["amp_state_dict"]["num_steps"] >= 1  # the discriminator stepped
    assert state["obs_groups"]["actor_reference"] == "reference"  # expert pairs: the reference stream, as embedded
