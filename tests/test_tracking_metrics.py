"""Success means one thing: an episode that ends without a termination (at its clip's end or the episode limit), in
training logs and in evaluation (from each clip's first frame); termination causes are counted separately."""

from __future__ import annotations

import pytest
import torch

from mimic_rl.config import load_config
from mimic_rl.envs.mujoco import DomainRandomization, MujocoTrackingEnv
from mimic_rl.envs.mujoco.robots import humanoid28_config
from mimic_rl.motion import RobotKinematics, SyntheticMotionConfig, save_motion, synthetic_clip
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.runners.episodes import EpisodeStats
from mimic_rl.runners.evaluation import evaluate_policy
from mimic_rl.tasks.tracking import TerminationConfig


def test_episode_stats_count_success_and_causes_by_hand():
    stats = EpisodeStats(3, "cpu")
    no = torch.zeros(3, dtype=torch.bool)
    stats.step(torch.tensor([1.0, 2.0, 3.0]), no, no, {"height": no, "tilt": no})
    dones, time_outs = torch.tensor([True, True, False]), torch.tensor([True, False, False])
    causes = {"height": torch.tensor([False, True, False]), "tilt": torch.tensor([False, True, True])}
    stats.step(torch.tensor([1.0, 1.0, 1.0]), dones, time_outs, causes)
    out = stats.pop()
    assert out == {
        "episode/count": 2.0,
        "episode/success_rate": 0.5,  # env 0 timed out, env 1 terminated
        "episode/reward": 2.5,  # (1 + 1 + 2 + 1) / 2
        "episode/length": 2.0,
        "episode/termination/height": 0.5,
        "episode/termination/tilt": 0.5,  # env 2's tilt does not count: its episode did not end
    }
    assert stats.pop() == {}  # nothing ended since
    assert stats.episode_reward.tolist() == [0.0, 0.0, 4.0]


def _cfg(termination: TerminationConfig):
    cfg = load_config("tracking_ppo")
    cfg.runner.num_steps_per_env, cfg.runner.logger, cfg.runner.time_budget_s = 25, "none", None
    cfg.env.num_envs = 4
    cfg.env.termination = termination
    cfg.env.randomization = DomainRandomization(enabled=False)
    cfg.env.episode_length_s = 10.0
    cfg.algorithm.update(num_mini_batches=1, num_learning_epochs=1)
    cfg.actor.update(hidden_dims=[16], init_noise_std=0.01)
    cfg.critic.update(hidden_dims=[16])
    return cfg


@pytest.mark.parametrize(
    "termination, expected, cause",
    [
        (TerminationConfig(anchor_height=None, anchor_tilt=None, ee_height=None), 1.0, None),  # nothing can fail
        (TerminationConfig(anchor_height=1e-9, anchor_tilt=None, ee_height=None), 0.0, "anchor_height"),  # all fail
    ],
)
def test_training_logs_and_evaluation_agree_on_success(termination, expected, cause, tmp_path):
    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = synthetic_clip(kin, SyntheticMotionConfig(duration=0.4, fps=50.0, amplitude=0.0))  # 20 steps, standing
    cfg = _cfg(termination)
    cfg.env.sampling_mode = "start"
    runner = OnPolicyRunner(cfg, log_dir=None, env=MujocoTrackingEnv(cfg.env, clips=[clip]))
    logs = runner.learn(1)
    assert logs["episode/count"] >= 4 and logs["episode/success_rate"] == expected
    if cause is not None:
        assert logs[f"episode/termination/{cause}"] == 1.0
    else:
        assert not [k for k in logs if k.startswith("episode/termination/")]
    cfg.env.motions = [str(save_motion(clip, tmp_path / "standing.npz"))]
    evaluation = evaluate_policy(runner.alg.actor, cfg, num_envs=4)
    assert evaluation["clips"][0]["success_rate"] == expected
    assert len(evaluation["clips"][0]["failure_times_s"]) == (4 if expected == 0.0 else 0)
    assert evaluation["clips"][0]["failure_causes"] == ({cause: 4} if cause else {})  # the one enabled term, 4 envs


def test_from_start_bookkeeping_hand_case():
    """Two envs, three steps: env 0 terminates at step 2, env 1 reaches the clip's end (loop stops there)."""
    from mimic_rl.tasks.tracking.from_start import EVAL_METRICS, FromStartEvaluation

    ev = FromStartEvaluation(2, ["a", "b"], step_dt=0.5)
    for step, (e0, e1) in enumerate([(10.0, 20.0), (30.0, 40.0), (999.0, 60.0)], start=1):
        metrics = {k: torch.tensor([e0, e1]) for k in EVAL_METRICS}
        metrics["body_error_mm"] = torch.tensor([[e0, 0.0], [e1, 2.0]])
        dones = torch.tensor([step == 2, False])
        terms = {"height": dones & True, "tilt": torch.tensor([False, step >= 2])}  # tilt fires for the living env 1
        ev.record(metrics, dones, terminated=dones, terms=terms)
    entry = ev.result("clip", duration_s=1.5, clip_steps=3, end_is_success=True)
    assert entry["success_rate"] == 0.5 and entry["failure_times_s"] == [1.0]
    assert entry["failure_causes"] == {"height": 1, "tilt": 0}  # only terms that ended a first episode count
    assert entry["episode_length"] == 2.5 and entry["episode_length_fraction"] == 2.5 / 3
    assert entry["global_mpjpe_mm"] == ((10 + 30) / 2 + (20 + 40 + 60) / 3) / 2  # env 0's step 3 is not counted
    assert entry["per_body_mpjpe_mm"] == {"a": (10 + 20 + 30 + 40 + 60) / 5, "b": 2.0 * 3 / 5}
    assert entry["over_time"]["alive"] == [2, 2, 1] and entry["over_time"]["global_mpjpe_mm"] == [15.0, 35.0, 60.0]
    assert FromStartEvaluation(1, [], 0.5).result("x", 1.0, 2)["success_rate"] == 0.0  # alive but not told: no success


def test_clips_played_at_once_keep_each_clips_bookkeeping_by_hand():
    """Two clips of two envs each in one evaluation (env i plays clip i // 2): clip 0 is the hand case above (env 0
    terminates at step 2, env 1 reaches the clip's end), clip 1 ends after one step (env 2 terminates, env 3 times
    out). Clip 1's entry stops with its envs: later steps (clip 0 still playing) add nothing to it."""
    from mimic_rl.tasks.tracking.from_start import EVAL_METRICS, FromStartEvaluation, clip_of_env

    assert clip_of_env(2, 2).tolist() == [0, 0, 1, 1]
    ev = FromStartEvaluation(2, ["a", "b"], step_dt=0.5, num_clips=2)
    for step, (e0, e1) in enumerate([(10.0, 20.0), (30.0, 40.0), (999.0, 60.0)], start=1):
        errors = torch.tensor([e0, e1, 7.0 * step, 9.0 * step])
        metrics = {k: errors for k in EVAL_METRICS}
        metrics["body_error_mm"] = torch.stack((errors, torch.tensor([0.0, 2.0, 1.0, 3.0])), dim=-1)
        dones = torch.tensor([step == 2, False, step == 1, step == 1])
        terminated = torch.tensor([step == 2, False, step == 1, False])
        terms = {"height": terminated, "tilt": torch.tensor([False, step >= 2, False, False])}
        ev.record(metrics, dones, terminated=terminated, terms=terms)
    first = ev.result("clip", duration_s=1.5, clip_steps=3, end_is_success=True, clip=0)
    assert first["success_rate"] == 0.5 and first["failure_times_s"] == [1.0]
    assert first["failure_causes"] == {"height": 1, "tilt": 0}
    assert first["global_mpjpe_mm"] == ((10 + 30) / 2 + (20 + 40 + 60) / 3) / 2
    assert first["per_body_mpjpe_mm"] == {"a": (10 + 20 + 30 + 40 + 60) / 5, "b": 2.0 * 3 / 5}
    assert first["over_time"]["alive"] == [2, 2, 1] and first["over_time"]["global_mpjpe_mm"] == [15.0, 35.0, 60.0]
    second = ev.result("short", duration_s=0.5, clip_steps=1, clip=1)
    assert second["success_rate"] == 0.5 and second["failure_times_s"] == [0.5]  # env 3 timed out at the end
    assert second["failure_causes"] == {"height": 1, "tilt": 0}
    assert second["global_mpjpe_mm"] == (7.0 + 9.0) / 2 and second["episode_length"] == 1.0
    assert second["per_body_mpjpe_mm"] == {"a": 8.0, "b": 2.0}
    assert second["over_time"] == {"time_s": [0.5], "global_mpjpe_mm": [8.0], "root_mpjpe_mm": [8.0], "alive": [2]}


def test_start_clips_starts_every_env_at_the_first_frame_of_its_clip():
    """``MujocoTrackingEnv.start_clips``: env i at the first frame of clip ``clip_ids[i]``, within the initial-state
    noise (two standing clips 0.5 m apart)."""
    from mimic_rl.motion import MotionClip

    kin = RobotKinematics(humanoid28_config().mjcf)
    base = synthetic_clip(kin, SyntheticMotionConfig(duration=0.4, fps=50.0, amplitude=0.0))
    shifted = base.body_pos_w.copy()
    shifted[..., 0] += 0.5
    moved = MotionClip(**{**base.__dict__, "body_pos_w": shifted})
    cfg = _cfg(TerminationConfig(anchor_height=None, anchor_tilt=None, ee_height=None))
    cfg.env.sampling_mode = "start"
    env = MujocoTrackingEnv(cfg.env, clips=[base, moved])
    env.start_clips(torch.tensor([1, 0, 1, 1]))
    assert env.clip_ids.tolist() == [1, 0, 1, 1] and env.motion_time.tolist() == [0.0] * 4
    x = env.robot_state().body_pos_w[:, env.root, 0]
    start_x = float(base.body_pos_w[0, 0, 0])
    expected = torch.tensor([0.5, 0.0, 0.5, 0.5]) + start_x
    assert float((x - expected).abs().max()) <= cfg.env.init_noise.root_pos + 0.02  # + one physics step of motion
    env.close()


def test_periodic_evaluation_logs_each_clip_and_keeps_a_history(tmp_path):
    """Two clips, evaluated from their start after every iteration: ``eval/<clip>/*`` scalars and one ``evals.jsonl``
    line per evaluation with each clip's success, termination times and causes (every episode fails at once here)."""
    import json

    kin = RobotKinematics(humanoid28_config().mjcf)
    paths = []
    for name, duration in (("short", 0.4), ("long", 0.6)):
        clip = synthetic_clip(kin, SyntheticMotionConfig(duration=duration, fps=50.0, amplitude=0.0))
        paths.append(str(save_motion(clip, tmp_path / f"{name}.npz")))
    cfg = _cfg(TerminationConfig(anchor_height=1e-9, anchor_tilt=None, ee_height=None))
    cfg.env.motions, cfg.runner.eval_interval, cfg.runner.eval_envs = paths, 1, 3
    runner = OnPolicyRunner(cfg, log_dir=tmp_path / "run")
    logs = runner.learn(2)
    assert logs["eval/short/success_rate"] == 0.0 and logs["eval/long/success_rate"] == 0.0
    assert logs["eval/success_rate"] == 0.0 and "eval/short/global_mpjpe_mm" in logs
    assert 0.0 < logs["sampler/entropy"] <= 1.0 and logs["sampler/top_bin_clip"] in (0.0, 1.0)  # adaptive starts
    lines = [json.loads(line) for line in (tmp_path / "run" / "evals.jsonl").read_text().splitlines()]
    assert [line["iteration"] for line in lines] == [1, 2]
    assert lines[1]["total_steps"] == 2 * 4 * 25  # 2 iterations of 4 envs x 25 steps
    for line in lines:
        assert [c["name"] for c in line["clips"]] == ["short", "long"]
        for clip in line["clips"]:
            assert clip["failure_causes"] == {"anchor_height": 3} and len(clip["failure_times_s"]) == 3
            assert "over_time" not in clip  # the series stay in eval.json


def test_failure_summary_and_eval_scalars_by_hand():
    from mimic_rl.tasks.tracking.from_start import eval_scalars, failure_summary

    clip = {"failure_times_s": [6.2, 6.4, 7.0], "failure_causes": {"ee_height": 1, "anchor_position": 3, "tilt": 0}}
    assert failure_summary([clip]) == ", terminations at 6.2-7.0 s (anchor_position 3, ee_height 1)"
    assert failure_summary([clip, {"failure_times_s": []}]) == ", terminations in 1 of 2 clips"
    assert failure_summary([{"failure_times_s": []}]) == ""
    keys = {"success_rate": 0.5, "global_mpjpe_mm": 1.0, "root_mpjpe_mm": 2.0, "episode_length_fraction": 0.75}
    one = eval_scalars({"clips": [{"name": "a", **keys}], "summary": keys})
    assert one == {f"eval/{k}": v for k, v in keys.items()}  # one clip: no per-clip copies
    low = {**keys, "success_rate": 0.25}
    two = eval_scalars({"clips": [{"name": "a", **keys}, {"name": "a", **low}], "summary": keys})
    assert two["eval/a/success_rate"] == 0.5 and two["eval/a#1/root_mpjpe_mm"] == 2.0 and len(two) == 13
    assert two["eval/worst_clip_success_rate"] == 0.25 and two["eval/a#1/success_rate"] == 0.25


def test_best_evaluation_rule_by_hand():
    from mimic_rl.runners.checkpoint import beats_best

    def rec(success, mpjpe, reached=1.0):
        return {"success_rate": success, "episode_length_fraction": reached, "global_mpjpe_mm": mpjpe}

    assert beats_best(rec(0.0, float("nan")), None)  # anything beats no best
    assert beats_best(rec(0.5, 120.0, 0.6), rec(0.44, 50.0, 0.9))  # success first, however large the error
    assert not beats_best(rec(0.44, 50.0), rec(0.5, 120.0))
    assert beats_best(rec(0.0, 110.0, 0.3), rec(0.0, 70.0, 0.1))  # no success: the share of the clip reached
    assert not beats_best(rec(0.0, 70.0, 0.1), rec(0.0, 110.0, 0.3))
    assert beats_best(rec(0.5, 90.0), rec(0.5, 100.0)) and not beats_best(rec(0.5, 100.0), rec(0.5, 90.0))
    assert not beats_best(rec(0.5, 100.0), rec(0.5, 100.0))  # a tie keeps the earlier checkpoint
    assert beats_best(rec(0.5, 100.0), rec(0.5, float("nan"))) and not beats_best(rec(0.5, float("nan")), rec(0.5, 1.0))

    # runner.best_by=worst_clip: the lowest clip's success first (clips 1.0 / 0.6 against 0.7 / 0.7), then the mean
    even = {**rec(0.7, 100.0), "worst_clip_success_rate": 0.7}
    uneven = {**rec(0.8, 90.0), "worst_clip_success_rate": 0.6}
    assert beats_best(uneven, even) and not beats_best(even, uneven)  # the mean's rule
    assert beats_best(even, uneven, "worst_clip") and not beats_best(uneven, even, "worst_clip")
    higher_mean = {**rec(0.75, 100.0), "worst_clip_success_rate": 0.7}
    assert beats_best(higher_mean, even, "worst_clip") and not beats_best(even, even, "worst_clip")
    assert beats_best(even, rec(0.65, 50.0), "worst_clip")  # a record without the lowest clip's counts its mean
    with pytest.raises(ValueError, match="best_by"):
        beats_best(even, uneven, "min")


def test_keep_best_saves_the_best_evaluation_and_a_resume_keeps_the_folders_best(tmp_path):
    """``model_best.pt`` is the checkpoint of the best line of ``evals.jsonl`` (the same weights as that iteration's
    ``model_<N>.pt``), and a resumed run compares against the folder's ``model_best.pt``, not against nothing."""
    import json

    from mimic_rl.runners import latest_checkpoint, load_checkpoint, save_checkpoint

    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = synthetic_clip(kin, SyntheticMotionConfig(duration=0.4, fps=50.0, amplitude=0.0))
    cfg = _cfg(TerminationConfig(anchor_height=0.3, anchor_tilt=None, ee_height=None))
    cfg.env.motions = [str(save_motion(clip, tmp_path / "clip.npz"))]
    cfg.runner.eval_interval, cfg.runner.eval_envs, cfg.runner.save_interval = 1, 2, 1
    run = tmp_path / "run"
    OnPolicyRunner(cfg, log_dir=run).learn(4)
    lines = [json.loads(line) for line in (run / "evals.jsonl").read_text().splitlines()]
    best = lines[0]  # by hand: the first line of the highest success, share of the clip reached, -global MPJPE
    for line in lines[1:]:
        s, b = line["summary"], best["summary"]
        keys = ("success_rate", "episode_length_fraction")
        if (*(s[k] for k in keys), -s["global_mpjpe_mm"]) > (*(b[k] for k in keys), -b["global_mpjpe_mm"]):
            best = line
    assert len({line["summary"]["global_mpjpe_mm"] for line in lines}) == 4  # the evaluations differ
    saved = load_checkpoint(run / "model_best.pt")
    assert saved["best_eval"]["iteration"] == best["iteration"] == saved["iteration"]
    assert saved["best_eval"]["global_mpjpe_mm"] == pytest.approx(best["summary"]["global_mpjpe_mm"])
    same = load_checkpoint(run / f"model_{best['iteration']}.pt")
    for name, tensor in saved["actor_state_dict"].items():
        assert torch.equal(tensor, same["actor_state_dict"][name])
    assert latest_checkpoint(run).name == "model_4.pt"  # model_best.pt is not a resume point

    saved["best_eval"]["success_rate"] = 2.0  # a best no evaluation can beat
    save_checkpoint(saved, run / "model_best.pt")
    resumed = OnPolicyRunner(cfg, log_dir=run)
    resumed.load(run / "model_4.pt")
    resumed.learn(2)
    assert load_checkpoint(run / "model_best.pt")["best_eval"]["success_rate"] == 2.0
    assert resumed.best_eval["iteration"] == best["iteration"]


def test_a_resume_redoes_the_evaluation_a_stop_cut_short(tmp_path, monkeypatch):
    """SIGTERM during the evaluation that follows ``model_2.pt``: the run resumed from it starts with that evaluation,
    so its ``evals.jsonl`` equals an uninterrupted run's line for line (iterations 2 and 4, the same numbers); resumed
    once more, it does not repeat the evaluation of iteration 4, which is there."""
    import json

    import mimic_rl.runners.evaluation as evaluation_module
    from mimic_rl.runners import latest_checkpoint

    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = synthetic_clip(kin, SyntheticMotionConfig(duration=0.4, fps=50.0, amplitude=0.0))
    cfg = _cfg(TerminationConfig(anchor_height=0.3, anchor_tilt=None, ee_height=None))
    cfg.env.motions = [str(save_motion(clip, tmp_path / "clip.npz"))]
    cfg.runner.eval_interval, cfg.runner.eval_envs, cfg.runner.save_interval = 2, 2, 2

    def lines(run):
        return [json.loads(line) for line in (run / "evals.jsonl").read_text().splitlines()]

    OnPolicyRunner(cfg, log_dir=tmp_path / "ref").learn(4)
    run = tmp_path / "run"
    evaluate = evaluation_module.evaluate_policy

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # what the CLI turns SIGTERM into

    monkeypatch.setattr(evaluation_module, "evaluate_policy", stopped)
    with pytest.raises(KeyboardInterrupt):
        OnPolicyRunner(cfg, log_dir=run).learn(4)
    assert (run / "model_2.pt").exists() and not (run / "evals.jsonl").exists()
    monkeypatch.setattr(evaluation_module, "evaluate_policy", evaluate)
    for _ in range(2):  # the second resume (from model_4.pt) finds iteration 4 evaluated
        resumed = OnPolicyRunner(cfg, log_dir=run)
        resumed.load(latest_checkpoint(run), resume=True)
        resumed.learn(4 - resumed.iteration)
    assert [line["iteration"] for line in lines(run)] == [2, 4]
    assert [line["summary"] for line in lines(run)] == [line["summary"] for line in lines(tmp_path / "ref")]


@pytest.mark.parametrize("best_by", ["mean", "worst_clip"])
def test_keep_best_ranks_by_the_configured_rule(best_by, tmp_path):
    """``runner.best_by`` reaches the runner's choice: of two evaluations (clips at 1.0 / 0.6, then 0.7 / 0.7), the
    mean's rule keeps the first in ``model_best.pt``, the lowest clip's rule replaces it with the second."""
    from mimic_rl.runners import load_checkpoint

    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = synthetic_clip(kin, SyntheticMotionConfig(duration=0.4, fps=50.0, amplitude=0.0))
    cfg = _cfg(TerminationConfig(anchor_height=0.3, anchor_tilt=None, ee_height=None))
    cfg.env.motions = [str(save_motion(clip, tmp_path / "clip.npz"))]
    cfg.runner.best_by = best_by
    runner = OnPolicyRunner(cfg, log_dir=tmp_path / "run")
    scalars = {"eval/episode_length_fraction": 1.0, "eval/global_mpjpe_mm": 80.0}
    uneven = {**scalars, "eval/success_rate": 0.8, "eval/worst_clip_success_rate": 0.6}
    even = {**scalars, "eval/success_rate": 0.7, "eval/worst_clip_success_rate": 0.7}
    assert runner._keep_best(uneven)
    runner.iteration = 7
    assert bool(runner._keep_best(even)) == (best_by == "worst_clip")
    saved = load_checkpoint(tmp_path / "run" / "model_best.pt")["best_eval"]
    assert (saved["iteration"], saved["worst_clip_success_rate"]) == ((7, 0.7) if best_by == "worst_clip" else (0, 0.6))


def test_action_noise_samples_the_actor_s_own_gaussian_around_its_mean():
    """``ActorPolicy(action_noise=S)`` (``mimic-rl eval --action-noise``) acts ``mean + S * std * z`` with ``z`` the
    standard normal draws of a generator seeded with ``seed``: the same draws, regenerated here; 0 gives the mean."""
    from mimic_rl.envs import PointMassTrackingEnv
    from mimic_rl.runners.evaluation import ActorPolicy

    cfg = load_config("tracking_ppo")
    cfg.actor, cfg.critic = {"hidden_dims": [16], "init_noise_std": 0.7}, {"hidden_dims": [16]}
    env = PointMassTrackingEnv(num_envs=512, seed=0)
    actor = OnPolicyRunner(cfg, log_dir=None, env=env).alg.actor
    obs = env.get_observations()
    with torch.inference_mode():
        mean = ActorPolicy(actor, cfg.obs_groups)(obs)
        assert torch.equal(ActorPolicy(actor, cfg.obs_groups, action_noise=0.0, seed=3)(obs), mean)
        sampled = ActorPolicy(actor, cfg.obs_groups, action_noise=0.5, seed=3)(obs)
    z = torch.randn(mean.shape, generator=torch.Generator().manual_seed(3))
    assert torch.allclose(sampled, mean + 0.5 * 0.7 * z, atol=1e-6)  # the actor's std is its init_noise_std here
    assert float(((sampled - mean) / 0.35).std()) == pytest.approx(1.0, abs=0.05)
