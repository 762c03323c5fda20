"""PointMassTrackingEnv: observation values, rewards, episode ends, masks, determinism, learnability of the task."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mimic_rl.envs import PointMassTrackingEnv, VecEnv, amp_obs_extractor, amp_reference_extractor
from mimic_rl.utils import resolve_callable


def hand_reference(env: PointMassTrackingEnv, n: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference position and velocity of env ``n`` at integer step ``step``, computed in float64 with math."""
    pos, vel = [], []
    for j in range(env.dim):
        c, a = float(env.centre[n, j]), float(env.amplitude[n, j])
        w, phi = float(env.omega[n, j]), float(env.phase[n, j])
        angle = w * step * env.dt + phi
        pos.append(c + a * math.sin(angle))
        vel.append(a * w * math.cos(angle))
    return np.array(pos), np.array(vel)


def current_step(env: PointMassTrackingEnv, n: int) -> int:
    return int(env.start_time[n] + env.episode_length_buf[n])


def test_observation_shapes_and_dtypes() -> None:
    env = PointMassTrackingEnv(num_envs=5, dim=3, num_future_frames=4)
    assert isinstance(env, VecEnv)
    assert env.num_actions == 3 and env.max_episode_length == 100
    obs = env.get_observations()
    shapes = env.observation_shapes()
    assert (
        set(obs.keys())
        == set(shapes)
        == {
            "policy",
            "reference",
            "reference_mask",
            "critic",
            "critic_reference",
            "critic_reference_mask",
            "amp",
            "proprio",
        }
    )
    assert shapes["policy"] == (6,) and shapes["reference"] == (4, 6) and shapes["critic"] == (7,)
    torch.testing.assert_close(obs["proprio"], env.pos - env.centre)
    assert tuple(obs.batch_size) == (5,)
    for key, shape in shapes.items():
        assert tuple(obs[key].shape) == (5, *shape), key
        assert obs[key].dtype == (torch.bool if key.endswith("mask") else torch.float32), key
    assert env.episode_length_buf.dtype == torch.long and torch.all(env.episode_length_buf == 0)
    # fresh episode: zero velocity, progress 0, start near the reference
    assert torch.all(obs["policy"][:, :3] == 0) and torch.all(obs["critic"][:, -1] == 0)
    assert torch.all(env.tracking_error() < 0.4)


def test_reference_group_matches_hand_computation() -> None:
    env = PointMassTrackingEnv(num_envs=4, dim=2, num_future_frames=3, frame_stride=2, termination_distance=100.0)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        obs, *_ = env.step(torch.rand(4, 2, generator=gen) * 2 - 1)
    n = 2
    pos = env.pos[n].double().numpy()
    for k in range(3):
        ref_pos, ref_vel = hand_reference(env, n, current_step(env, n) + 2 * k)
        np.testing.assert_allclose(obs["reference"][n, k, :2].numpy(), ref_pos - pos, atol=1e-5)
        np.testing.assert_allclose(obs["reference"][n, k, 2:].numpy(), ref_vel, atol=1e-5)
    assert torch.equal(obs["critic_reference"], obs["reference"])
    np.testing.assert_allclose(obs["policy"][n, 2:].numpy(), pos - env.centre[n].double().numpy(), atol=1e-6)
    np.testing.assert_allclose(obs["critic"][n, -1].item(), 3 / 100)
    # AMP extractors: the velocity, and the current-time reference velocity in the same layout
    assert torch.equal(amp_obs_extractor(obs), env.vel)
    feats, mask = amp_reference_extractor((obs["reference"], obs["reference_mask"]))
    np.testing.assert_allclose(feats[n].numpy(), hand_reference(env, n, current_step(env, n))[1], atol=1e-5)
    assert torch.equal(mask, obs["reference_mask"])
    assert resolve_callable("mimic_rl.envs.toy:amp_reference_extractor") is amp_reference_extractor


def test_dynamics_and_reward_formula() -> None:
    env = PointMassTrackingEnv(num_envs=6, dim=2, dt=0.1, action_scale=0.5, termination_distance=100.0)
    actions = torch.tensor([[0.3, -0.2], [2.0, -3.0], [0.0, 0.0], [-1.0, 1.0], [0.9, 0.1], [-0.5, -0.5]])
    pos0 = env.pos.double().numpy().copy()
    obs, rewards, dones, extras = env.step(actions)
    expected_vel = 0.5 * np.clip(actions.double().numpy(), -1, 1)
    expected_pos = pos0 + 0.1 * expected_vel
    np.testing.assert_allclose(env.pos.numpy(), expected_pos, atol=1e-6)
    np.testing.assert_allclose(obs["policy"][:, :2].numpy(), expected_vel, atol=1e-6)
    for n in range(6):
        ref_pos, _ = hand_reference(env, n, current_step(env, n))
        dist2 = float(((expected_pos[n] - ref_pos) ** 2).sum())
        assert rewards[n].item() == pytest.approx(math.exp(-dist2 / 0.05), rel=1e-5, abs=1e-7)
        assert env.tracking_error()[n].item() == pytest.approx(math.sqrt(dist2), abs=1e-5)
    assert rewards.dtype == torch.float32 and rewards.shape == (6,)
    assert dones.dtype == torch.bool and not dones.any() and not extras["time_outs"].any()
    assert extras["log"]["reward"].item() == pytest.approx(rewards.mean().item())


def test_time_out_resets_and_reports_final_observations() -> None:
    env = PointMassTrackingEnv(num_envs=8, max_episode_length=5, termination_distance=1e6)
    zero = torch.zeros(8, 2)
    for _ in range(4):
        _, _, dones, extras = env.step(zero)
        assert not dones.any() and not extras["time_outs"].any()
    pos_before, centre_before = env.pos.clone(), env.centre.clone()
    obs, _, dones, extras = env.step(zero)
    assert dones.all() and extras["time_outs"].all()
    assert torch.all(env.episode_length_buf == 0)
    final = extras["final_observations"]
    assert tuple(final.batch_size) == (8,) and set(final.keys()) == set(obs.keys())
    assert torch.all(final["critic"][:, -1] == 1.0) and torch.all(obs["critic"][:, -1] == 0.0)
    torch.testing.assert_close(final["policy"][:, 2:], pos_before - centre_before)  # zero action: pos unchanged
    assert not torch.allclose(obs["policy"][:, 2:], final["policy"][:, 2:])  # new episode, new trajectory
    _, _, dones, _ = env.step(zero)
    assert not dones.any() and torch.all(env.episode_length_buf == 1)


def test_termination_when_far_from_reference() -> None:
    env = PointMassTrackingEnv(num_envs=6, termination_distance=1.0)
    env.pos[1] += torch.tensor([3.0, 0.0])
    far_pos = env.pos[1].clone()
    obs, rewards, dones, extras = env.step(torch.zeros(6, 2))
    assert dones.tolist() == [False, True, False, False, False, False]
    assert not extras["time_outs"].any()
    assert rewards[1].item() < 1e-30
    final = extras["final_observations"]
    keep = torch.tensor([True, False, True, True, True, True])
    for key in sorted(obs.keys()):  # rows of envs that did not reset equal the returned observations
        assert torch.equal(final[key][keep], obs[key][keep]), key
    assert final["reference"][1, 0, 0].item() < -2.0  # the pre-reset reference lies ~3 behind in x
    assert obs["reference"][1, 0, :2].norm().item() < 0.4  # reset near the new reference
    assert not torch.equal(env.pos[1], far_pos) and env.episode_length_buf[1] == 0
    assert extras["log"]["tracking_error"].item() > 3.0 / 6


def test_reference_mask_zeroes_rows_and_hidden_target_is_the_start_point() -> None:
    env = PointMassTrackingEnv(num_envs=256, reference_fraction=0.5, seed=3)
    obs = env.get_observations()
    mask = obs["reference_mask"]
    assert 0.3 < mask.float().mean().item() < 0.7
    assert torch.all(obs["reference"][~mask] == 0) and torch.all(obs["critic_reference"][~mask] == 0)
    assert torch.all(obs["reference"][mask].abs().sum(dim=(-1, -2)) > 0)
    hidden = PointMassTrackingEnv(num_envs=16, reference_fraction=0.0)
    start = hidden.pos.clone()
    for _ in range(20):
        obs, rewards, dones, _ = hidden.step(torch.zeros(16, 2))
    assert not obs["reference_mask"].any() and torch.all(obs["reference"] == 0)
    assert torch.equal(hidden.pos, start) and torch.all(rewards == 1.0) and not dones.any()
    _, rewards, _, _ = hidden.step(torch.ones(16, 2))  # moving away from the start point costs reward
    assert torch.all(rewards < 0.95)


def rollout(env: PointMassTrackingEnv, steps: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        obs, rewards, dones, extras = env.step(torch.randn(env.num_envs, env.dim, generator=gen))
        out += [obs["policy"], obs["reference"], obs["reference_mask"], rewards, dones, extras["time_outs"]]
    return out


def test_same_seed_same_rollout_and_expert_sampling_does_not_perturb_it() -> None:
    kwargs = {"num_envs": 16, "max_episode_length": 7, "reference_fraction": 0.7, "termination_distance": 0.3}
    a = rollout(PointMassTrackingEnv(seed=5, **kwargs), 30, seed=0)
    env_b = PointMassTrackingEnv(seed=5, **kwargs)
    env_b.sample_expert_pairs(100)
    b = rollout(env_b, 30, seed=0)
    c = rollout(PointMassTrackingEnv(seed=6, **kwargs), 30, seed=0)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))
    assert any(d.any() for d in a[4::6])  # resets happened inside the compared rollout


def mean_tracking_error(env: PointMassTrackingEnv, controller: bool, steps: int = 100) -> float:
    obs = env.get_observations()
    errors = []
    for _ in range(steps):
        if controller:
            ref = obs["reference"][:, 0]
            actions = ref[:, 2:] + 5.0 * ref[:, :2]  # ref_vel + 5 * (ref_pos - pos)
        else:
            actions = torch.zeros(env.num_envs, env.dim)
        obs, _, _, extras = env.step(actions)
        errors.append(extras["log"]["tracking_error"])
    return torch.stack(errors).mean().item()


def test_scripted_controller_tracks_far_better_than_zero_action() -> None:
    tracked = mean_tracking_error(PointMassTrackingEnv(num_envs=64, seed=0), controller=True)
    idle = mean_tracking_error(PointMassTrackingEnv(num_envs=64, seed=0), controller=False)
    assert idle > 0.2
    assert tracked / idle < 0.1


def test_sample_expert_pairs_are_consecutive_reference_velocities() -> None:
    dt = 0.05
    env = PointMassTrackingEnv(num_envs=2, dim=2, dt=dt)
    s_prev, s = env.sample_expert_pairs(100_000)
    assert s_prev.shape == s.shape == (100_000, 2) and s.dtype == torch.float32
    # |v| <= A w <= 1 and |v(t) - v(t-1)| <= max |acceleration| * dt = A w^2 dt <= 0.1
    assert s.abs().max().item() <= 1.0 and (s - s_prev).abs().max().item() <= 0.5 * 4.0 * dt + 1e-6
    # second moments against independent quadrature over A ~ U(0.2, 0.5), w ~ U(0.5, 2), uniform phase
    a2 = (0.5**3 - 0.2**3) / (3 * 0.3)
    w = np.linspace(0.5, 2.0, 100_001)
    expected_v2 = a2 * np.mean(w**2) / 2
    expected_dv2 = a2 * np.mean(2 * w**2 * np.sin(w * dt / 2) ** 2)
    assert s.square().mean().item() == pytest.approx(expected_v2, rel=0.03)
    assert (s - s_prev).square().mean().item() == pytest.approx(expected_dv2, rel=0.03)
    # the velocity change is a small step, not an independent draw
    corr = torch.corrcoef(torch.stack((s.flatten(), s_prev.flatten())))[0, 1].item()
    assert corr > 0.99


def test_randomized_initial_episode_length_keeps_start_on_the_reference() -> None:
    env = PointMassTrackingEnv(num_envs=64, max_episode_length=50, randomize_initial_episode_length=True)
    lengths = env.episode_length_buf
    assert lengths.min().item() >= 0 and lengths.max().item() < 50 and lengths.unique().numel() > 10
    assert torch.all(env.tracking_error() < 0.4)
    obs = env.get_observations()
    torch.testing.assert_close(obs["critic"][:, -1], lengths.float() / 50)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, "num_envs"),
        ({"dim": 0}, "dim"),
        ({"reference_fraction": 1.5}, "reference_fraction"),
        ({"reference_fraction": -0.1}, "reference_fraction"),
        ({"dt": 0.0}, "dt"),
        ({"max_episode_length": 0}, "max_episode_length"),
    ],
)
def test_invalid_arguments_raise(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PointMassTrackingEnv(**kwargs)


def test_wrong_action_shape_raises() -> None:
    env = PointMassTrackingEnv(num_envs=4, dim=2)
    with pytest.raises(ValueError, match="actions"):
        env.step(torch.zeros(4, 3))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_cuda_and_matches_itself() -> None:
    a = PointMassTrackingEnv(num_envs=32, device="cuda", seed=2)
    b = PointMassTrackingEnv(num_envs=32, device="cuda", seed=2)
    for _ in range(10):
        actions = torch.ones(32, 2, device="cuda") * 0.3
        oa, ra, da, _ = a.step(actions)
        ob, rb, db, _ = b.step(actions)
        assert oa.device.type == "cuda" and torch.equal(ra, rb) and torch.equal(da, db)
        assert torch.equal(oa["reference"], ob["reference"])


def test_a_hidden_actuator_gain_scales_the_velocity_and_is_privileged() -> None:
    env = PointMassTrackingEnv(num_envs=64, dim=2, action_gain_range=(0.5, 2.0), seed=3)
    gain = env.action_gain.clone()
    assert float(gain.min()) >= 0.5 and float(gain.max()) <= 2.0 and float(gain.std()) > 0.2
    assert env.observation_shapes()["critic"] == (6,)
    torch.testing.assert_close(env.get_observations()["critic"][:, -1:], gain)
    pos = env.pos.clone()
    action = torch.full((64, 2), 0.4)
    env.step(action)
    torch.testing.assert_close(env.vel, 0.4 * gain.expand(64, 2))
    torch.testing.assert_close(env.pos, pos + 0.4 * gain * env.dt)
    plain = PointMassTrackingEnv(num_envs=64, dim=2, seed=3)  # without the option: gain 1, same random stream
    assert bool((plain.action_gain == 1.0).all()) and plain.observation_shapes()["critic"] == (5,)
    torch.testing.assert_close(plain.pos, pos)
