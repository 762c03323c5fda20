"""The tracking MDP as tables of terms: every term against an independent formula (rotation matrices, not the
package's quaternion code), the tables built from the configs, user-added terms, groups as concatenations."""

from __future__ import annotations

import math

import pytest
import torch

import mimic_rl.tasks.tracking as tk
from mimic_rl.tasks.tracking import rewards

CASES = [("cpu", torch.float64), ("cuda", torch.float64)]
N, B, J, K = 64, 6, 5, 3
ANCHOR, ROOT, EE = 2, 0, (1, 4)


@pytest.fixture(params=CASES, ids=lambda c: c[0])
def dd(request) -> dict:
    device, dtype = request.param
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no cuda")
    return {"device": torch.device(device), "dtype": dtype}


# ---------------------------------------------------------------- an independent geometry (matrices)


def mat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrix of unit quaternions wxyz, from the axis-angle (Rodrigues) form."""
    q = q * torch.where(q[..., :1] < 0, -1.0, 1.0)
    angle = 2.0 * torch.atan2(q[..., 1:].norm(dim=-1), q[..., 0])
    axis = q[..., 1:] / q[..., 1:].norm(dim=-1, keepdim=True)
    x, y, z = axis.unbind(-1)
    zero = torch.zeros_like(x)
    skew = torch.stack((zero, -z, y, z, zero, -x, -y, x, zero), -1).reshape(*q.shape[:-1], 3, 3)
    s, c = torch.sin(angle)[..., None, None], torch.cos(angle)[..., None, None]
    eye = torch.eye(3, dtype=q.dtype, device=q.device).expand_as(skew)
    return eye + s * skew + (1 - c) * (skew @ skew)


def rot_z(yaw: torch.Tensor) -> torch.Tensor:
    c, s, zero, one = torch.cos(yaw), torch.sin(yaw), torch.zeros_like(yaw), torch.ones_like(yaw)
    return torch.stack((c, -s, zero, s, c, zero, zero, zero, one), -1).reshape(*yaw.shape, 3, 3)


def yaw_of(r: torch.Tensor) -> torch.Tensor:
    return torch.atan2(r[..., 1, 0], r[..., 0, 0])


def angle_between(r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    rel = r1.transpose(-1, -2) @ r2
    cos = (rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2
    sin = torch.stack(
        (rel[..., 2, 1] - rel[..., 1, 2], rel[..., 0, 2] - rel[..., 2, 0], rel[..., 1, 0] - rel[..., 0, 1]), -1
    )
    return torch.atan2(sin.norm(dim=-1) / 2, cos)


def local(r: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``r^T v``."""
    return (r.transpose(-1, -2) @ v.unsqueeze(-1)).squeeze(-1)


def six_d(r: torch.Tensor) -> torch.Tensor:
    return r[..., :, :2].flatten(-2)


# ---------------------------------------------------------------- random steps


def random_quat(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    q = torch.randn(*shape, 4, generator=g, dtype=torch.float64)
    return q / q.norm(dim=-1, keepdim=True)


def random_step(dd, seed: int = 0) -> tk.StepContext:
    """A robot near its reference (which is yawed and shifted as a whole), future frames, actions, limits."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, dtype=torch.float64)

    robot = tk.BodyState(r(N, J), r(N, J), r(N, B, 3, scale=0.3), random_quat((N, B), g), r(N, B, 3), r(N, B, 3))
    small = torch.cat((torch.ones(N, B, 1, dtype=torch.float64), r(N, B, 3, scale=0.2)), -1)
    small = small / small.norm(dim=-1, keepdim=True)
    turn = torch.tensor([math.cos(0.35), 0.0, 0.0, math.sin(0.35)], dtype=torch.float64).expand(N, B, 4)
    ref_quat = _quat_mul(turn, _quat_mul(robot.body_quat_w, small))
    ref_pos = robot.body_pos_w + r(N, B, 3, scale=0.15) + torch.tensor([0.4, -0.3, 0.0], dtype=torch.float64)
    ref = tk.BodyState(
        robot.joint_pos + r(N, J, scale=0.3), robot.joint_vel + r(N, J), ref_pos, ref_quat,
        robot.body_lin_vel_w + r(N, B, 3, scale=0.5), robot.body_ang_vel_w + r(N, B, 3),
    )  # fmt: skip
    future = tk.BodyState(
        r(N, K, J), r(N, K, J), r(N, K, 1, 3), random_quat((N, K, 1), g), r(N, K, 1, 3), r(N, K, 1, 3)
    )
    lower, upper = -r(J).abs() - 0.2, r(J).abs() + 0.2
    lower[0], upper[0] = -math.inf, math.inf  # an unlimited joint
    layout = tk.TrackingLayout(ANCHOR, ROOT, torch.tensor(EE), r(J, scale=0.1), lower, upper)
    move = lambda x: x.to(**dd)  # noqa: E731
    return tk.StepContext(
        robot=robot.map(lambda x, _: move(x)),
        layout=tk.TrackingLayout(
            ANCHOR,
            ROOT,
            layout.end_effectors.to(dd["device"]),
            move(layout.default_joint_pos),
            move(lower),
            move(upper),
        ),
        actions=move(r(N, J)),
        last_actions=move(r(N, J)),
        ref=ref.map(lambda x, _: move(x)),
        future=future.map(lambda x, _: move(x)),
    )


def _quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        -1,
    )


# ---------------------------------------------------------------- expected values, term by term


def expected_rewards(ctx: tk.StepContext, cfg: tk.TrackingRewardConfig) -> dict[str, torch.Tensor]:
    """Unweighted reward terms from rotation matrices (BeyondMimic's definitions)."""
    robot, ref, a = ctx.robot, ctx.ref, ANCHOR
    rr, rf = mat(robot.body_quat_w), mat(ref.body_quat_w)
    delta = rot_z(yaw_of(rr[:, a]) - yaw_of(rf[:, a]))  # the reference turned to the robot's heading
    origin = torch.cat((robot.body_pos_w[:, a, :2], ref.body_pos_w[:, a, 2:]), -1)
    offsets = ref.body_pos_w - ref.body_pos_w[:, a : a + 1]
    target_pos = origin[:, None] + (delta[:, None] @ offsets.unsqueeze(-1)).squeeze(-1)
    target_rot = delta[:, None] @ rf
    lower, upper, ratio = ctx.layout.joint_lower, ctx.layout.joint_upper, cfg.joint_limit_soft_ratio
    half, mid = ratio * (upper - lower) / 2, (upper + lower) / 2
    outside = (robot.joint_pos - (mid + half)).clamp(min=0) + ((mid - half) - robot.joint_pos).clamp(min=0)
    outside = torch.where(torch.isfinite(lower) & torch.isfinite(upper), outside, 0.0)

    def kern(err, std):
        return torch.exp(-err / std**2)

    return {
        "anchor_pos": kern(((ref.body_pos_w[:, a] - robot.body_pos_w[:, a]) ** 2).sum(-1), cfg.anchor_pos_std),
        "anchor_ori": kern(angle_between(rf[:, a], rr[:, a]) ** 2, cfg.anchor_ori_std),
        "body_pos": kern(((target_pos - robot.body_pos_w) ** 2).sum(-1).mean(-1), cfg.body_pos_std),
        "body_ori": kern((angle_between(target_rot, rr) ** 2).mean(-1), cfg.body_ori_std),
        "body_lin_vel": kern(((ref.body_lin_vel_w - robot.body_lin_vel_w) ** 2).sum(-1).mean(-1), cfg.body_lin_vel_std),
        "body_ang_vel": kern(((ref.body_ang_vel_w - robot.body_ang_vel_w) ** 2).sum(-1).mean(-1), cfg.body_ang_vel_std),
        "joint_pos": kern(((ref.joint_pos - robot.joint_pos) ** 2).mean(-1), cfg.joint_pos_std),
        "joint_vel": kern(((ref.joint_vel - robot.joint_vel) ** 2).mean(-1), cfg.joint_vel_std),
        "action_rate": ((ctx.actions - ctx.last_actions) ** 2).sum(-1),
        "joint_limit": outside.sum(-1),
    }


def termination_errors(ctx: tk.StepContext) -> dict[str, torch.Tensor]:
    """The quantity each termination compares with its threshold."""
    robot, ref, a, ee = ctx.robot, ctx.ref, ANCHOR, list(EE)
    gravity_z = lambda q: -mat(q)[..., 2, 2]  # noqa: E731  (R^T (0, 0, -1)).z
    return {
        "anchor_height": (ref.body_pos_w[:, a, 2] - robot.body_pos_w[:, a, 2]).abs(),
        "anchor_position": (ref.body_pos_w[:, a] - robot.body_pos_w[:, a]).norm(dim=-1),
        "anchor_tilt": (gravity_z(ref.body_quat_w[:, a]) - gravity_z(robot.body_quat_w[:, a])).abs(),
        "ee_height": (ref.body_pos_w[:, ee, 2] - robot.body_pos_w[:, ee, 2]).abs().amax(-1),
    }


def expected_observations(ctx: tk.StepContext) -> dict[str, torch.Tensor]:
    robot, fut, a = ctx.robot, ctx.future, ANCHOR
    ra = mat(robot.body_quat_w[:, a])
    pa = robot.body_pos_w[:, a]
    rf = mat(fut.body_quat_w[:, :, 0])
    frames = torch.cat(
        (fut.joint_pos, fut.joint_vel, local(ra[:, None], fut.body_pos_w[:, :, 0] - pa[:, None]),
         six_d(ra[:, None].transpose(-1, -2) @ rf)),
        -1,
    )  # fmt: skip
    bodies = torch.cat(
        (
            local(ra[:, None], robot.body_pos_w - pa[:, None]),
            six_d(ra[:, None].transpose(-1, -2) @ mat(robot.body_quat_w)),
        ),
        -1,
    )
    return {
        "joint_pos_rel": robot.joint_pos - ctx.layout.default_joint_pos,
        "joint_vel": robot.joint_vel,
        "anchor_lin_vel_b": local(ra, robot.body_lin_vel_w[:, a]),
        "anchor_ang_vel_b": local(ra, robot.body_ang_vel_w[:, a]),
        "projected_gravity": local(ra, torch.tensor([0.0, 0.0, -1.0], dtype=ra.dtype, device=ra.device).expand(N, 3)),
        "last_action": ctx.actions,
        "reference_frames": frames,
        "body_poses_b": bodies.flatten(1),
        "anchor_height": pa[:, 2:3],
        "joint_pos": robot.joint_pos,
    }


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, atol=1e-9, rtol=1e-9)


ALL_ON = tk.TrackingRewardConfig(  # every term on, no two weights or widths alike (a row with another's catches it)
    anchor_pos_weight=0.5, anchor_pos_std=0.31, anchor_ori_weight=0.6, anchor_ori_std=0.42,
    body_pos_weight=1.1, body_pos_std=0.33, body_ori_weight=0.9, body_ori_std=0.44,
    body_lin_vel_weight=1.2, body_lin_vel_std=1.1, body_ang_vel_weight=0.8, body_ang_vel_std=3.0,
    joint_pos_weight=0.7, joint_pos_std=0.55, joint_vel_weight=0.3, joint_vel_std=4.5,
    action_rate_weight=-0.15, joint_limit_weight=-9.0, joint_limit_soft_ratio=0.85,
)  # fmt: skip
REWARD_NAMES = ["anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel", "joint_pos",
                "joint_vel", "action_rate", "joint_limit"]  # fmt: skip


# ---------------------------------------------------------------- rewards


def test_every_reward_term_matches_its_formula(dd):
    for seed in range(3):
        ctx = random_step(dd, seed)
        expected = expected_rewards(ctx, ALL_ON)
        table = tk.reward_terms(ALL_ON)
        assert [row.name for row in table] == REWARD_NAMES
        for row in table:
            assert row.weight == getattr(ALL_ON, f"{row.name}_weight")
            close(row.func(ctx, **row.params), expected[row.name])
        for name in ("body_pos", "body_ori", "joint_pos"):  # a non-degenerate state: kernels inside (0, 1)
            assert 0.01 < float(expected[name].median()) < 0.99
        assert float(expected["joint_limit"].max()) > 0.0


def test_tracking_reward_is_the_weighted_table(dd):
    ctx = random_step(dd, 1)
    expected = expected_rewards(ctx, ALL_ON)
    layout = ctx.layout
    args = (ctx.robot, ctx.ref, ANCHOR, ctx.actions, ctx.last_actions, layout.joint_lower, layout.joint_upper)
    total, terms = tk.tracking_reward(ALL_ON, *args)
    assert list(terms) == REWARD_NAMES
    for name, value in terms.items():
        close(value, getattr(ALL_ON, f"{name}_weight") * expected[name])
    assert torch.equal(total, torch.stack(list(terms.values())).sum(0))  # stack-then-sum in table order
    table_total, table_terms = tk.evaluate_rewards(tk.reward_terms(ALL_ON), ctx)
    assert torch.equal(table_total, total) and all(torch.equal(table_terms[k], terms[k]) for k in terms)


@pytest.mark.parametrize("off", ["anchor_ori", "body_pos", "body_ori", "joint_limit", "action_rate"])
def test_weight_zero_term_is_absent(dd, off):
    cfg = tk.TrackingRewardConfig(**{f"{off}_weight": 0.0})
    assert off not in [row.name for row in tk.reward_terms(cfg)]
    assert "joint_pos" not in [row.name for row in tk.reward_terms(cfg)]  # weight 0 by default
    ctx = random_step(dd, 2)
    layout = ctx.layout
    total, terms = tk.tracking_reward(
        cfg, ctx.robot, ctx.ref, ANCHOR, ctx.actions, ctx.last_actions, layout.joint_lower, layout.joint_upper
    )
    assert off not in terms and len(terms) == 7
    close(total, sum(getattr(cfg, f"{k}_weight") * v for k, v in expected_rewards(ctx, cfg).items() if k in terms))


def test_a_user_term_adds_weight_times_value(dd):
    ctx = random_step(dd, 3)

    def height_above(ctx: tk.StepContext, floor: float) -> torch.Tensor:
        return ctx.robot.body_pos_w[:, ANCHOR, 2] - floor

    table = tk.reward_terms(tk.TrackingRewardConfig())
    base, base_terms = tk.evaluate_rewards(table, ctx)
    extra = tk.RewardTerm("height", height_above, -0.75, {"floor": 0.25})
    total, terms = tk.evaluate_rewards((*table, extra), ctx)
    value = ctx.robot.body_pos_w[:, ANCHOR, 2] - 0.25
    assert list(terms) == [*base_terms, "height"]
    assert torch.equal(terms["height"], -0.75 * value)
    assert all(torch.equal(terms[k], v) for k, v in base_terms.items())
    assert torch.equal(total, torch.stack(list(terms.values())).sum(0))
    close(total - base, -0.75 * value)


def test_empty_reward_table_gives_zeros(dd):
    ctx = random_step(dd, 0)
    total, terms = tk.evaluate_rewards((), ctx)
    assert terms == {} and torch.equal(total, torch.zeros(N, **dd))


# ---------------------------------------------------------------- terminations


def test_every_termination_term_matches_its_formula(dd):
    ctx = random_step(dd, 4)
    errors = termination_errors(ctx)
    thresholds = {k: float(v.median()) for k, v in errors.items()}  # about half of the envs on each side
    cfg = tk.TerminationConfig(**thresholds)
    table = tk.termination_terms(cfg)
    assert [row.name for row in table] == ["anchor_height", "anchor_position", "anchor_tilt", "ee_height"]
    for row in table:
        value = row.func(ctx, **row.params)
        expected = errors[row.name] > thresholds[row.name]
        assert value.dtype == torch.bool and torch.equal(value, expected) and 0 < int(expected.sum()) < N
    done, terms = tk.tracking_terminations(cfg, ctx.robot, ctx.ref, ANCHOR, list(EE))
    assert list(terms) == [row.name for row in table]
    assert torch.equal(done, torch.stack([errors[k] > v for k, v in thresholds.items()]).any(0))


def test_switched_off_terminations_are_absent(dd):
    ctx = random_step(dd, 5)
    assert [row.name for row in tk.termination_terms(tk.TerminationConfig())] == [
        "anchor_height", "anchor_tilt", "ee_height",
    ]  # fmt: skip
    cfg = tk.TerminationConfig(anchor_height=None, anchor_tilt=None)
    assert [row.name for row in tk.termination_terms(cfg)] == ["ee_height"]
    assert tk.termination_terms(cfg, has_end_effectors=False) == ()
    done, terms = tk.tracking_terminations(cfg, ctx.robot, ctx.ref, ANCHOR, [])
    assert terms == {} and done.dtype == torch.bool and not bool(done.any())


# ---------------------------------------------------------------- observations


def test_every_observation_term_matches_its_formula(dd):
    ctx = random_step(dd, 6)
    expected = expected_observations(ctx)
    groups = tk.observation_terms()
    assert list(groups) == ["policy", "reference", "critic", "amp"]
    seen = set()
    for terms in groups.values():
        for term in terms:
            close(term.func(ctx, **term.params), expected[term.name])
            seen.add(term.name)
    assert seen == set(expected)


def test_groups_are_their_terms_concatenated_in_order(dd):
    ctx = random_step(dd, 7)
    groups = tk.observation_terms()
    obs = tk.evaluate_observations(groups, ctx)
    for name, terms in groups.items():
        assert torch.equal(obs[name], torch.cat([term.func(ctx, **term.params) for term in terms], -1))
    assert [t.name for t in groups["critic"]] == [t.name for t in groups["policy"]] + ["body_poses_b", "anchor_height"]
    assert obs["reference"].shape == (N, K, 2 * J + 9) and obs["critic"].shape == (N, 3 * J + 9 + 9 * B + 1)
    legacy = tk.observation_groups(ctx.robot, ctx.future, ctx.layout, ctx.actions)
    assert list(legacy) == list(obs) and all(torch.equal(legacy[k], obs[k]) for k in obs)
    extra = {
        "policy": (
            *groups["policy"],
            tk.ObservationTerm("height", lambda c, scale: scale * c.robot.joint_pos, {"scale": 2.0}),
        )
    }
    assert torch.equal(
        tk.evaluate_observations(extra, ctx)["policy"], torch.cat((obs["policy"], 2.0 * ctx.robot.joint_pos), -1)
    )


# ---------------------------------------------------------------- the step


def test_step_evaluation_is_the_tables(dd):
    ctx = random_step(dd, 8)
    term_cfg = tk.TerminationConfig(anchor_position=0.5)
    truncated = torch.arange(N, device=dd["device"]) % 3 == 0
    out = tk.step_evaluation(ALL_ON, term_cfg, ctx.robot, ctx.ref, ctx.future, ctx.layout, ctx.actions,
                             ctx.last_actions, truncated, 0.02)  # fmt: skip
    fresh = tk.StepContext(ctx.robot, ctx.layout, ctx.actions, ctx.last_actions, ctx.ref, ctx.future)
    reward, terms = tk.evaluate_rewards(tk.reward_terms(ALL_ON), fresh)
    done, done_terms = tk.evaluate_terminations(tk.termination_terms(term_cfg), fresh)
    assert torch.equal(out["reward"], reward) and torch.equal(out["terminated"], done)
    assert torch.equal(out["time_outs"], truncated & ~done)
    assert list(out["termination_terms"]) == list(done_terms)
    assert [k for k in out["log"] if k.startswith("reward/")] == [f"reward/{k}" for k in terms] + ["reward/total"]
    obs = tk.evaluate_observations(tk.observation_terms(), fresh)
    assert all(torch.equal(out["obs"][k], obs[k]) for k in obs)
    assert torch.equal(out["obs"]["policy"][:, -J:], ctx.actions)  # the action just applied is the last action
    extra = tk.RewardTerm("alive", lambda c: torch.ones_like(c.robot.joint_pos[:, 0]), 2.0)
    tables = {
        "reward_table": (*tk.reward_terms(ALL_ON), extra),
        "termination_table": (),
        "observation_table": {"amp": tk.observation_terms()["amp"]},
    }
    mine = tk.step_evaluation(ALL_ON, term_cfg, ctx.robot, ctx.ref, ctx.future, ctx.layout, ctx.actions,
                              ctx.last_actions, truncated, 0.02, **tables)  # fmt: skip
    close(mine["reward"], reward + 2.0)
    assert "reward/alive" in mine["log"] and mine["termination_terms"] == {} and not bool(mine["terminated"].any())
    assert list(mine["obs"]) == ["amp"] and torch.equal(mine["obs"]["amp"], obs["amp"])


def test_shared_targets_are_computed_once_and_missing_inputs_are_named(dd):
    ctx = random_step(dd, 9)
    rewards.body_pos_exp(ctx, 0.3)
    cached = ctx.cache["relative_targets"]
    rewards.body_ori_exp(ctx, 0.4)
    assert ctx.cache["relative_targets"] is cached
    bare = tk.StepContext(ctx.robot, ctx.layout)
    with pytest.raises(ValueError, match=r"StepContext\.ref"):
        rewards.anchor_pos_exp(bare, 0.3)
    with pytest.raises(ValueError, match=r"StepContext\.last_actions"):
        rewards.action_rate_l2(tk.StepContext(ctx.robot, ctx.layout, actions=ctx.actions))


def test_step_evaluation_traces_without_graph_breaks():
    ctx = random_step({"device": torch.device("cpu"), "dtype": torch.float32}, 10)
    truncated = torch.zeros(N, dtype=torch.bool)
    args = (ctx.robot, ctx.ref, ctx.future, ctx.layout, ctx.actions, ctx.last_actions, truncated, 1.0)

    def step(*a):
        return tk.step_evaluation(ALL_ON, tk.TerminationConfig(), *a)

    compiled = torch.compile(step, backend="eager", fullgraph=True)  # fullgraph: a graph break is an error
    out, eager = compiled(*args), step(*args)
    assert torch.equal(out["reward"], eager["reward"]) and torch.equal(out["obs"]["critic"], eager["obs"]["critic"])
