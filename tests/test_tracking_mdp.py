"""The tracking MDP core: observations, rewards, terminations, metrics and AMP features against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

import mimic_rl.tasks.tracking as tk
from mimic_rl.rotations import (
    matrix_from_quat,
    normalize_quat,
    quat_apply,
    quat_apply_inverse,
    quat_conjugate,
    quat_conjugate_mul,
    quat_mul,
    quat_slerp,
    yaw_quat,
)

CASES = [("cpu", torch.float32), ("cpu", torch.float64), ("cuda", torch.float32), ("cuda", torch.float64)]


@pytest.fixture(params=CASES, ids=lambda c: f"{c[0]}-{str(c[1]).split('.')[-1]}")
def dd(request) -> dict:
    """Device and dtype keyword arguments; cuda cases skip without a GPU."""
    device, dtype = request.param
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no cuda")
    return {"device": torch.device(device), "dtype": dtype}


def t(x, dd) -> torch.Tensor:
    return torch.tensor(x, **dd)


def quat_z(angle: float, dd) -> torch.Tensor:
    return t([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)], dd)


def quat_axis(axis: int, angle: float, dd) -> torch.Tensor:
    q = [math.cos(angle / 2), 0.0, 0.0, 0.0]
    q[1 + axis] = math.sin(angle / 2)
    return t(q, dd)


def close(actual, expected, dd, scale: float = 1.0) -> None:
    tol = (1e-5 if dd["dtype"] == torch.float32 else 1e-10) * scale
    expected = torch.as_tensor(expected, dtype=actual.dtype, device=actual.device)
    torch.testing.assert_close(actual, expected.expand_as(actual), atol=tol, rtol=tol)


def random_state(n: int, b: int, j: int, dd, seed: int = 0) -> tk.BodyState:
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(**dd)

    return tk.BodyState(r(n, j), r(n, j), r(n, b, 3), normalize_quat(r(n, b, 4)), r(n, b, 3), r(n, b, 3))


def transform_state(s: tk.BodyState, yaw: float, shift_xy: tuple[float, float], dd) -> tk.BodyState:
    """Turn a whole state about world z by ``yaw`` and move it horizontally."""
    q = quat_z(yaw, dd).expand_as(s.body_quat_w)
    shift = t([shift_xy[0], shift_xy[1], 0.0], dd)
    return tk.BodyState(
        s.joint_pos,
        s.joint_vel,
        quat_apply(q, s.body_pos_w) + shift,
        quat_mul(q, s.body_quat_w),
        quat_apply(q, s.body_lin_vel_w),
        quat_apply(q, s.body_ang_vel_w),
    )


# ---------------------------------------------------------------- observations


def test_reference_observation_hand_case(dd):
    anchor_pos, anchor_quat = t([[1.0, 2.0, 0.5]], dd), quat_z(math.pi / 2, dd)[None]
    ref_q = t([[[0.1, 0.2], [0.3, 0.4]]], dd)
    ref_qd = t([[[1.0, 2.0], [3.0, 4.0]]], dd)
    ref_pos = t([[[1.0, 3.0, 0.7], [1.0, 2.0, 0.5]]], dd)  # K=2: 1 m along world y, 0.2 up; then the same spot
    ref_quat = torch.stack((t([1.0, 0, 0, 0], dd), quat_z(math.pi / 2, dd)))[None]
    obs = tk.reference_observation(ref_q, ref_qd, ref_pos, ref_quat, anchor_pos, anchor_quat)
    assert obs.shape == (1, 2, tk.reference_observation_dim(2)) == (1, 2, 13)
    close(obs[0, :, :2], ref_q[0], dd)
    close(obs[0, :, 2:4], ref_qd[0], dd)
    # world +y is the robot's +x after a 90 degree yaw; the robot's -90 degree relative yaw in 6D
    close(obs[0, 0, 4:], [1.0, 0.0, 0.2, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0], dd)
    # same pose: zero position, identity 6D = first two matrix columns row by row
    close(obs[0, 1, 4:], [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0], dd)


def test_body_pose_in_anchor_frame(dd):
    anchor_pos, anchor_quat = t([[1.0, 2.0, 0.5]], dd), quat_z(math.pi / 2, dd)[None]
    body_pos = t([[[1.0, 1.0, 0.5], [1.0, 2.0, 1.5]]], dd)
    body_quat = torch.stack((quat_mul(anchor_quat[0], quat_axis(0, math.pi / 2, dd)), anchor_quat[0]))[None]
    out = tk.body_pose_in_anchor_frame(body_pos, body_quat, anchor_pos, anchor_quat)
    assert out.shape == (1, 2, 9)
    # world -y is the anchor's -x; relative rotation 90 degrees about x: columns (1,0,0) and (0,0,1)
    close(out[0, 0], [-1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0], dd)
    close(out[0, 1], [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0], dd)


def test_relative_reference_body_poses_hand_case(dd):
    ref_anchor_pos, ref_anchor_quat = t([[5.0, 5.0, 0.9]], dd), t([[1.0, 0, 0, 0]], dd)
    anchor_pos, anchor_quat = t([[1.0, 2.0, 0.8]], dd), quat_z(math.pi / 2, dd)[None]
    ref_body_pos = t([[[5.0, 5.0, 0.9], [6.0, 5.0, 0.4]]], dd)
    ref_body_quat = t([[[1.0, 0, 0, 0], [1.0, 0, 0, 0]]], dd)
    pos, quat = tk.relative_reference_body_poses(
        ref_body_pos, ref_body_quat, ref_anchor_pos, ref_anchor_quat, anchor_pos, anchor_quat
    )
    close(pos[0], [[1.0, 2.0, 0.9], [1.0, 3.0, 0.4]], dd)  # robot xy, reference height, robot heading
    close(matrix_from_quat(quat[0]), matrix_from_quat(quat_z(math.pi / 2, dd)).expand(2, 3, 3), dd)


def test_relative_targets_invariant_to_moving_the_reference(dd):
    ref = random_state(3, 4, 2, dd, seed=1)
    robot = random_state(3, 4, 2, dd, seed=2)
    moved = transform_state(ref, 1.3, (4.0, -2.5), dd)

    def targets(r: tk.BodyState):
        return tk.relative_reference_body_poses(
            r.body_pos_w, r.body_quat_w, r.body_pos_w[:, 0], r.body_quat_w[:, 0], robot.body_pos_w[:, 0],
            robot.body_quat_w[:, 0],
        )  # fmt: skip

    (p0, q0), (p1, q1) = targets(ref), targets(moved)
    close(p1, p0, dd, scale=10)
    close(matrix_from_quat(q1), matrix_from_quat(q0), dd, scale=10)
    # the targets keep the reference heights (the end-effector termination relies on it)
    close(p0[..., 2], ref.body_pos_w[..., 2], dd, scale=10)


def test_relative_targets_equal_the_yaw_quaternion_composition(dd):
    """Second implementation: ``delta = yaw(anchor) * yaw(ref_anchor)^-1`` as quaternions, applied with quat_apply, on
    tilted anchors with headings whose difference wraps past +-pi (the function computes the heading difference as
    one planar rotation)."""
    g = torch.Generator().manual_seed(3)
    n, b = 64, 5
    ref_pos, pos = torch.randn(n, b, 3, generator=g).to(**dd), torch.randn(n, 3, generator=g).to(**dd)
    ref_anchor_pos = torch.randn(n, 3, generator=g).to(**dd)
    ref_quat, anchor_quat, ref_anchor_quat = (
        normalize_quat(torch.randn(*shape, 4, generator=g).to(**dd)) for shape in ((n, b), (n,), (n,))
    )
    pos_out, quat_out = tk.relative_reference_body_poses(
        ref_pos, ref_quat, ref_anchor_pos, ref_anchor_quat, pos, anchor_quat
    )
    delta = quat_mul(yaw_quat(anchor_quat), quat_conjugate(yaw_quat(ref_anchor_quat))).unsqueeze(1).expand(n, b, 4)
    origin = torch.cat((pos[:, :2], ref_anchor_pos[:, 2:]), dim=-1).unsqueeze(1)
    close(pos_out, origin + quat_apply(delta, ref_pos - ref_anchor_pos.unsqueeze(1)), dd, scale=10)
    close(matrix_from_quat(quat_out), matrix_from_quat(quat_mul(delta, ref_quat)), dd, scale=10)


def test_inverse_rotations_equal_the_conjugate_composition(dd):
    """``quat_conjugate_mul(a, b)`` and ``quat_apply_inverse(q, v)`` (written without the conjugate) against the
    conjugate composed with ``quat_mul`` / ``quat_apply``, and a rotation undone by its inverse."""
    g = torch.Generator().manual_seed(5)
    a, b = (normalize_quat(torch.randn(50, 3, 4, generator=g).to(**dd)) for _ in range(2))
    v = torch.randn(50, 3, 3, generator=g).to(**dd)
    close(quat_conjugate_mul(a, b), quat_mul(quat_conjugate(a), b), dd)
    close(quat_apply_inverse(a, v), quat_apply(quat_conjugate(a), v), dd)
    close(quat_apply(a, quat_apply_inverse(a, v)), v, dd, scale=10)


def test_slerp_equals_the_textbook_formula(dd):
    """``(sin((1 - t) theta) a + sin(t theta) b) / sin(theta)`` along the shorter arc, in float64 by hand; also for
    nearly equal quaternions (the formula's 0 / 0) and at both ends."""
    g = torch.Generator().manual_seed(4)
    a = normalize_quat(torch.randn(200, 4, generator=g, dtype=torch.float64))
    b = normalize_quat(torch.randn(200, 4, generator=g, dtype=torch.float64))
    b[:50] = normalize_quat(a[:50] + 1e-7 * torch.randn(50, 4, generator=g, dtype=torch.float64))
    b[50:60] = a[50:60]
    frac = torch.rand(200, generator=g, dtype=torch.float64)
    frac[60:70], frac[70:80] = 0.0, 1.0
    dot = (a * b).sum(-1, keepdim=True)
    near = torch.where(dot < 0, -b, b)
    theta = torch.acos(dot.abs().clamp(max=1.0))
    s, u = torch.sin(theta), frac.unsqueeze(-1)
    textbook = torch.where(s > 1e-12, (torch.sin((1 - u) * theta) * a + torch.sin(u * theta) * near) / s, a)
    expected = normalize_quat(torch.where(s > 1e-12, textbook, (1 - u) * a + u * near))
    close(quat_slerp(a.to(**dd), b.to(**dd), frac.to(**dd)), expected, dd)


def test_projected_gravity(dd):
    close(tk.projected_gravity(t([1.0, 0, 0, 0], dd)), [0.0, 0.0, -1.0], dd)
    close(tk.projected_gravity(quat_axis(1, math.pi / 2, dd)), [1.0, 0.0, 0.0], dd)  # pitched nose down 90 degrees
    q = random_state(5, 3, 1, dd).body_quat_w
    close(tk.projected_gravity(q), quat_apply_inverse(q, t([0.0, 0.0, -1.0], dd).expand(5, 3, 3)), dd)


# ---------------------------------------------------------------- rewards


def test_reward_terms_hand_values(dd):
    e = math.exp
    close(tk.anchor_position_reward(t([[0.0, 0.0, 1.0]], dd), t([[0.0, 0.3, 1.0]], dd), 0.3), [e(-1.0)], dd)
    q0 = t([[1.0, 0, 0, 0]], dd)
    close(tk.anchor_orientation_reward(q0, quat_axis(0, 0.4, dd)[None], 0.4), [e(-1.0)], dd)
    close(tk.anchor_orientation_reward(q0, -quat_axis(0, 0.4, dd)[None], 0.4), [e(-1.0)], dd)  # sign-agnostic
    pos = t([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]], dd)
    moved = pos + t([[[0.3, 0.0, 0.0], [0.0, 0.0, 0.0]]], dd)
    close(tk.relative_body_position_reward(moved, pos, 0.3), [e(-0.5)], dd)  # mean of (0.09, 0) / 0.09
    quats = torch.stack((q0[0], q0[0]))[None]
    turned = torch.stack((quat_axis(2, 0.4, dd), q0[0]))[None]
    close(tk.relative_body_orientation_reward(turned, quats, 0.4), [e(-0.5)], dd)
    vel = t([[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], dd)
    close(tk.body_linear_velocity_reward(vel, torch.zeros_like(vel), 1.0), [e(-0.5)], dd)
    ang = t([[[0.0, 3.14, 0.0], [3.14, 0.0, 0.0]]], dd)
    close(tk.body_angular_velocity_reward(ang, torch.zeros_like(ang), 3.14), [e(-1.0)], dd)
    close(tk.joint_position_reward(t([[0.5, -0.5]], dd), t([[0.0, 0.0]], dd), 0.5), [e(-1.0)], dd)
    close(tk.joint_velocity_reward(t([[5.0, 0.0]], dd), t([[0.0, 0.0]], dd), 5.0), [e(-0.5)], dd)


def test_penalties(dd):
    close(tk.action_rate_penalty(t([[1.0, 2.0], [0.5, 0.5]], dd), t([[0.0, 0.0], [0.5, 1.5]], dd)), [5.0, 1.0], dd)
    lower, upper = t([-1.0, 0.0], dd), t([1.0, 2.0], dd)  # soft (0.9): [-0.9, 0.9] and [0.1, 1.9]
    q = t([[0.95, 0.0], [0.0, 1.0], [-1.2, 2.5]], dd)
    close(tk.joint_limit_penalty(q, lower, upper), [0.05 + 0.1, 0.0, 0.3 + 0.6], dd)
    close(tk.joint_limit_penalty(q, lower, upper, soft_ratio=1.0), [0.0, 0.0, 0.2 + 0.5], dd)
    # a joint without limits (a wheel: MuJoCo's range [0, 0] read as -inf..inf) is never penalized, far from 0 too
    inf = float("inf")
    lower, upper = t([-inf, 0.0], dd), t([inf, 2.0], dd)
    q = t([[25.0, 2.5], [-40.0, 1.0]], dd)
    close(tk.joint_limit_penalty(q, lower, upper), [0.6, 0.0], dd)


def test_identical_robot_and_reference_give_full_reward_and_zero_metrics(dd):
    s = random_state(3, 4, 5, dd, seed=3)
    ones = torch.ones(3, **dd)
    close(tk.anchor_position_reward(s.body_pos_w[:, 1], s.body_pos_w[:, 1], 0.3), ones, dd)
    close(tk.anchor_orientation_reward(s.body_quat_w[:, 1], s.body_quat_w[:, 1], 0.4), ones, dd)
    target_pos, target_quat = tk.relative_reference_body_poses(
        s.body_pos_w, s.body_quat_w, s.body_pos_w[:, 1], s.body_quat_w[:, 1], s.body_pos_w[:, 1], s.body_quat_w[:, 1]
    )
    close(tk.relative_body_position_reward(target_pos, s.body_pos_w, 0.3), ones, dd)
    close(tk.relative_body_orientation_reward(target_quat, s.body_quat_w, 0.4), ones, dd)
    close(tk.body_linear_velocity_reward(s.body_lin_vel_w, s.body_lin_vel_w, 1.0), ones, dd)
    close(tk.body_angular_velocity_reward(s.body_ang_vel_w, s.body_ang_vel_w, 3.14), ones, dd)
    close(tk.joint_position_reward(s.joint_pos, s.joint_pos, 0.5), ones, dd)
    close(tk.joint_velocity_reward(s.joint_vel, s.joint_vel, 5.0), ones, dd)

    lower, upper = torch.full((5,), -10.0, **dd), torch.full((5,), 10.0, **dd)
    action = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).to(**dd)
    total, terms = tk.tracking_reward(tk.TrackingRewardConfig(), s, s, 1, action, action, lower, upper)
    assert set(terms) == {"anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel",
                          "action_rate", "joint_limit"}  # fmt: skip
    close(total, 5.0 * ones, dd)  # 0.5 + 0.5 + 1 + 1 + 1 + 1; penalties 0

    for value in tk.tracking_metrics(s, s, root=0, ee_indices=[2, 3]).values():
        close(value, torch.zeros(3, **dd), dd)


def test_tracking_reward_weights_terms(dd):
    robot = random_state(2, 3, 4, dd, seed=4)
    ref = random_state(2, 3, 4, dd, seed=5)
    action, prev = torch.ones(2, 4, **dd), torch.zeros(2, 4, **dd)
    lower, upper = torch.full((4,), -0.5, **dd), torch.full((4,), 0.5, **dd)
    cfg = tk.TrackingRewardConfig(joint_pos_weight=0.25, body_ori_weight=0.0, action_rate_weight=-0.5)
    total, terms = tk.tracking_reward(cfg, robot, ref, 0, action, prev, lower, upper)
    assert "body_ori" not in terms and "joint_vel" not in terms
    close(terms["joint_pos"], 0.25 * tk.joint_position_reward(ref.joint_pos, robot.joint_pos, 0.5), dd)
    close(terms["action_rate"], -0.5 * 4.0 * torch.ones(2, **dd), dd)
    close(terms["joint_limit"], -10.0 * tk.joint_limit_penalty(robot.joint_pos, lower, upper, 0.9), dd)
    target_pos, _ = tk.relative_reference_body_poses(
        ref.body_pos_w, ref.body_quat_w, ref.body_pos_w[:, 0], ref.body_quat_w[:, 0], robot.body_pos_w[:, 0],
        robot.body_quat_w[:, 0],
    )  # fmt: skip
    close(terms["body_pos"], tk.relative_body_position_reward(target_pos, robot.body_pos_w, 0.3), dd)
    close(total, torch.stack(list(terms.values())).sum(0), dd)
    assert total.shape == (2,) and total.dtype == dd["dtype"] and total.device.type == dd["device"].type


# ---------------------------------------------------------------- terminations


def test_termination_thresholds(dd):
    ref = t([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dd)
    robot = t([[5.0, 5.0, 1.26], [5.0, 5.0, 0.76]], dd)
    assert tk.anchor_height_termination(ref, robot, 0.25).tolist() == [True, False]
    lag = t([[0.0, 0.0, 1.0], [0.3, 0.4, 1.0], [0.3, 0.39, 1.0]], dd)  # 0, 0.5 and 0.49 m behind the reference
    ref3 = t([[0.0, 0.0, 1.0]] * 3, dd)
    assert tk.anchor_position_termination(ref3, lag, 0.495).tolist() == [False, True, False]
    ref_ee = t([[[0.0, 0.0, 0.1], [0.0, 0.0, 0.1]]] * 3, dd)
    ee = ref_ee + t([[[0, 0, 0.24], [0, 0, -0.24]], [[0, 0, 0.0], [0, 0, -0.26]], [[0, 0, 0.26], [0, 0, 0.0]]], dd)
    assert tk.end_effector_height_termination(ref_ee, ee, 0.25).tolist() == [False, True, True]

    upright = t([[1.0, 0, 0, 0]] * 4, dd)
    limit = math.acos(0.2)  # 1 - cos(tilt) = 0.8
    tilts = [math.pi / 2, math.pi / 6, limit + 0.01, limit - 0.01]
    robot_q = torch.stack([quat_mul(quat_z(0.7, dd), quat_axis(1, a, dd)) for a in tilts])
    assert tk.anchor_tilt_termination(upright, robot_q, 0.8).tolist() == [True, False, True, False]


def test_tracking_terminations_combined(dd):
    ref = random_state(3, 3, 2, dd, seed=6)
    up = t([1.0, 0, 0, 0], dd).expand(3, 3, 4)
    ref = tk.BodyState(ref.joint_pos, ref.joint_vel, ref.body_pos_w, up, ref.body_lin_vel_w, ref.body_ang_vel_w)
    dz = t([[0.0, 0.0, 0.0], [0.0, -0.3, 0.0], [0.0, 0.0, 0.3]], dd)  # env 1: anchor too low; env 2: an ee too high
    pos = ref.body_pos_w + t([0.0, 0.0, 1.0], dd) * dz.unsqueeze(-1) + t([2.0, 2.0, 0.0], dd)
    robot = tk.BodyState(ref.joint_pos, ref.joint_vel, pos, up, ref.body_lin_vel_w, ref.body_ang_vel_w)
    done, terms = tk.tracking_terminations(tk.TerminationConfig(), robot, ref, anchor=1, ee_indices=[0, 2])
    assert done.dtype == torch.bool and done.tolist() == [False, True, True]
    assert terms["anchor_height"].tolist() == [False, True, False]
    assert terms["ee_height"].tolist() == [False, False, True]
    assert terms["anchor_tilt"].tolist() == [False, False, False]
    assert "anchor_position" not in terms  # off by default: the robot stands 2.8 m beside its reference here
    done, terms = tk.tracking_terminations(tk.TerminationConfig(anchor_position=2.5), robot, ref, 1, [0, 2])
    assert terms["anchor_position"].tolist() == [True, True, True] and done.all()
    done, terms = tk.tracking_terminations(tk.TerminationConfig(anchor_height=None), robot, ref, 1, [0])
    assert set(terms) == {"anchor_tilt", "ee_height"} and done.tolist() == [False, False, False]


# ---------------------------------------------------------------- metrics


def test_metric_hand_values(dd):
    ref = t([[[0.0, 0.0, 1.0], [0.2, 0.0, 1.0], [0.0, 0.3, 1.0]]], dd)
    off = ref + t([[[0.0, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.0]]], dd)  # one of 3 bodies 10 cm away
    close(tk.mpjpe(ref, off), [100.0 / 3], dd, scale=100)
    shifted = ref + t([0.3, -0.4, 0.0], dd)  # the whole robot moved by 0.5 m
    close(tk.mpjpe(ref, shifted), [500.0], dd, scale=100)
    close(tk.root_relative_mpjpe(ref, shifted, root=0), [0.0], dd)
    close(tk.root_relative_mpjpe(ref, off, root=1), [200.0 / 3], dd, scale=100)  # root moved: the other two are off
    close(tk.joint_position_error(t([[0.1, -0.3]], dd), t([[0.0, 0.0]], dd)), [0.2], dd)
    close(tk.joint_velocity_rms_error(t([[3.0, 4.0]], dd), t([[0.0, 0.0]], dd)), [math.sqrt(12.5)], dd)
    ee_ref = t([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]], dd)
    ee = ee_ref + t([[[0.03, 0.0, 0.0], [0.0, 0.0, -0.05]]], dd)
    close(tk.end_effector_error(ee_ref, ee), [40.0], dd, scale=100)


def test_tracking_metrics_accumulator(dd):
    m = tk.TrackingMetrics()
    m.update({"a": t([1.0, 2.0, 3.0], dd)}, mask=t([1, 1, 0], dd).bool())
    m.update({"a": t([4.0, 5.0, 6.0], dd), "b": t([1.0, 1.0, 1.0], dd)})
    m.update({"b": t([float("nan"), 3.0, 5.0], dd)}, mask=t([0, 1, 1], dd).bool())  # masked-out NaN is ignored
    f = t([0, 0, 0], dd).bool()
    m.episode_end(terminated=torch.tensor([True, False, False], device=dd["device"]), timed_out=f)
    m.episode_end(terminated=f, timed_out=torch.tensor([False, True, True], device=dd["device"]))
    m.episode_end(
        terminated=torch.tensor([True, False, False], device=dd["device"]),
        timed_out=torch.tensor([True, False, False], device=dd["device"]),
    )
    m.episode_end(terminated=f, timed_out=f)  # nothing ends
    out = m.summary()
    assert out["a"] == pytest.approx(18.0 / 5)
    assert out["b"] == pytest.approx(11.0 / 5)
    assert out["episodes"] == 4.0  # 1 + 2 + 1 (terminated on its last step: a failure)
    assert out["success_rate"] == pytest.approx(0.5)
    m.reset()
    out = m.summary()
    assert math.isnan(out["success_rate"]) and out["episodes"] == 0.0 and "a" not in out
    m.add_sums(["a", "b"], t([6.0, 2.0], dd).double(), 2.0)  # precomputed sums (the env's compiled step)
    m.update({"a": t([0.0, 3.0], dd)})
    out = m.summary()
    assert out["a"] == pytest.approx(9.0 / 4) and out["b"] == pytest.approx(1.0)


# ---------------------------------------------------------------- AMP features


def test_amp_features_hand_case(dd):
    pos = t([[[0.0, 0.0, 0.9], [0.0, 1.0, 0.9], [1.0, 0.0, 0.1]]], dd)
    quat = quat_z(math.pi / 2, dd).expand(1, 3, 4)
    lin = t([[[0.0, 1.0, 0.2], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], dd)
    ang = t([[[0.0, 0.0, 0.5], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], dd)
    q, qd = t([[0.1, 0.2]], dd), t([[0.3, 0.4]], dd)
    f = tk.amp_features(q, qd, pos, quat, lin, ang, anchor=0, key_bodies=[1, 2])
    assert f.shape == (1, tk.amp_feature_dim(2, 2)) == (1, 23)
    expected = [0.1, 0.2, 0.3, 0.4, 0.9, 1.0, 0.0, 0.2, 0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    expected += [1.0, 0.0, 0.0, 0.0, -1.0, -0.8]  # key bodies: world +y -> heading +x, world +x -> heading -y
    close(f[0], expected, dd)


def test_amp_features_heading_invariance_and_leading_shape(dd):
    s = random_state(2, 4, 3, dd, seed=7)
    keys = torch.tensor([3, 1], device=dd["device"])
    moved = transform_state(s, -2.1, (3.0, -1.5), dd)

    def feats(x: tk.BodyState):
        return tk.amp_features(
            x.joint_pos, x.joint_vel, x.body_pos_w, x.body_quat_w, x.body_lin_vel_w, x.body_ang_vel_w, 2, keys
        )

    f0, f1 = feats(s), feats(moved)
    assert f0.shape == (2, tk.amp_feature_dim(3, 2))
    close(f1, f0, dd, scale=10)
    # any leading shape: [T, N, ...] gives the per-env rows; the anchor tilt part is heading-free (zero yaw)
    stacked = tk.BodyState(*(torch.stack((a, b)) for a, b in zip(vars(s).values(), vars(moved).values())))
    f2 = feats(stacked)
    assert f2.shape == (2, 2, f0.shape[-1])
    close(f2[0], f0, dd)
    tilt = matrix_from_quat(torch.tensor([1.0, 0, 0, 0], **dd))  # identity when the anchor is upright
    up = tk.BodyState(s.joint_pos, s.joint_vel, s.body_pos_w, quat_z(0.8, dd).expand(2, 4, 4), s.body_lin_vel_w,
                   s.body_ang_vel_w)  # fmt: skip
    close(feats(up)[:, 13:19], tilt[:, :2].reshape(6).expand(2, 6), dd)


def test_body_state_select(dd):
    s = random_state(2, 4, 3, dd, seed=8)
    sub = s.select([3, 0])
    assert sub.num_bodies == 2 and sub.num_joints == 3
    close(sub.body_pos_w[:, 0], s.body_pos_w[:, 3], dd)
    close(sub.body_quat_w[:, 1], s.body_quat_w[:, 0], dd)
    close(sub.body_ang_vel_w, s.body_ang_vel_w[:, [3, 0]], dd)
    pos, quat, lin, ang = s.body(2)
    close(pos, s.body_pos_w[:, 2], dd)
    close(quat, s.body_quat_w[:, 2], dd)
    close(lin, s.body_lin_vel_w[:, 2], dd)
    close(ang, s.body_ang_vel_w[:, 2], dd)
