"""One regression test per GBC MMPPO defect; each would fail on GBC's logic."""

from __future__ import annotations

import copy

import torch
from helpers import rollout, toy_cfg

from mimic_rl.algorithms import MMPPO, Symmetry
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.models import Actor

AMP = {
    "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
    "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor",
}


def make(num_envs=16, seed=0, **algorithm):
    torch.manual_seed(seed)
    env = PointMassTrackingEnv(num_envs=num_envs, seed=seed)
    obs = env.get_observations()
    alg = MMPPO.construct_algorithm(obs, env, toy_cfg(**algorithm), "cpu")
    return alg, env, obs


def test_action_std_is_trained():
    alg, env, obs = make()
    before = alg.actor.head.std().clone()
    in_optimizer = {id(p) for group in alg.optimizer.param_groups for p in group["params"]}
    assert id(alg.actor.head.std_param) in in_optimizer  # GBC left it out of the optimizer
    rollout(alg, env, obs, 24)
    alg.update()
    assert not torch.equal(alg.actor.head.std(), before)


def test_style_reward_reaches_the_stored_rewards():
    alg, env, obs = make(amp_cfg={**AMP, "task_weight": 0.25, "style_weight": 2.0})
    with torch.inference_mode():
        alg.act(obs)
        prev = obs["amp"].clone()
        next_obs, rewards, dones, extras = env.step(alg.transition["action_mean"])
        alg.process_env_step(next_obs, rewards, dones, extras)
    nxt = torch.where(dones.unsqueeze(-1), extras["final_observations"]["amp"], next_obs["amp"])
    style = alg.amp.style_reward(prev, nxt)
    assert style.abs().sum() > 0
    torch.testing.assert_close(alg.storage.get()["rewards"][0].squeeze(-1), 0.25 * rewards + 2.0 * style)


def test_rnd_predictor_weights_change_after_update():
    alg, env, obs = make(rnd_cfg={"weight": 0.5, "learning_rate": 1e-3})
    predictor = copy.deepcopy(alg.rnd.predictor.state_dict())
    target = copy.deepcopy(alg.rnd.target.state_dict())
    rollout(alg, env, obs, 24)
    assert alg.storage.get()["rnd_state"].abs().sum() > 0
    out = alg.update()
    assert "rnd" in out
    changed = [not torch.equal(v, alg.rnd.predictor.state_dict()[k]) for k, v in predictor.items()]
    assert all(changed)
    assert all(torch.equal(v, alg.rnd.target.state_dict()[k]) for k, v in target.items())  # frozen


def test_gradient_penalty_ignores_policy_pairs():
    alg, _, _ = make(amp_cfg=AMP)
    amp = alg.amp
    g = torch.Generator().manual_seed(0)
    policy_a = (torch.randn(32, 2, generator=g), torch.randn(32, 2, generator=g))
    policy_b = (torch.randn(32, 2, generator=g) * 3, torch.randn(32, 2, generator=g) + 1)
    expert = (torch.randn(32, 2, generator=g), torch.randn(32, 2, generator=g))
    expert2 = (expert[0] * 2, expert[1] - 1)
    gp = lambda p, e: amp.losses(*p, None, *e, None)["amp_grad_penalty"]  # noqa: E731
    assert torch.equal(gp(policy_a, expert), gp(policy_b, expert))  # no dependence on the policy pairs
    assert not torch.equal(gp(policy_a, expert), gp(policy_a, expert2))
    # zero gradient with respect to the policy pairs, and the same parameter gradient whatever they are
    params = list(amp.discriminator.parameters())
    prev = policy_a[0].clone().requires_grad_(True)
    penalty = amp.losses(prev, policy_a[1], None, *expert, None)["amp_grad_penalty"]
    g_prev, *g_params_a = torch.autograd.grad(penalty, [prev, *params], allow_unused=True)
    assert g_prev is None or torch.all(g_prev == 0)
    g_params_b = torch.autograd.grad(gp(policy_b, expert), params, allow_unused=True)
    assert sum(float(g.abs().sum()) for g in g_params_a if g is not None) > 0
    for ga, gb in zip(g_params_a, g_params_b):
        assert (ga is None and gb is None) or torch.equal(ga, gb)


def test_imitation_loss_leaves_the_ppo_gradient_intact():
    teacher = Actor(4, 2, ref_shape=(3, 4), hidden_dims=[8])
    dagger = {"teacher": teacher, "loss": "mse", "coef": 0.7}
    alg, env, obs = make(dagger_cfg=dagger)
    rollout(alg, env, obs, 24)
    batch = next(alg.storage.mini_batches(2, 1))
    params = [*alg.actor.parameters(), *alg.critic.parameters()]

    def grads(loss):
        return torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)

    terms, _ = alg._policy_terms(batch)
    combined = grads(alg._policy_loss(terms))
    ppo_only = grads(terms["surrogate"] + terms["value"] - alg.entropy_coef * terms["entropy"])
    imitation = grads(terms["imitation"])
    for c, p, i in zip(combined, ppo_only, imitation):
        expected = (0 if p is None else p) + 0.7 * (0 if i is None else i)
        torch.testing.assert_close(c if c is not None else torch.zeros_like(expected), expected)
    # coefficient 0: bitwise the same update as without DAgger (one optimizer, one backward, nothing wiped)
    runs = []
    for cfg in ({"dagger_cfg": {**dagger, "coef": 0.0}}, {}):
        alg, env, obs = make(seed=3, **cfg)
        rollout(alg, env, obs, 24)
        torch.manual_seed(7)
        alg.update()
        runs.append(alg.actor.state_dict())
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])


def test_normalizer_is_updated_once_per_iteration_with_raw_observations(monkeypatch):
    alg, env, obs = make()
    calls = []
    real = alg.actor.obs_normalizer.update
    monkeypatch.setattr(alg.actor.obs_normalizer, "update", lambda x, m=None: calls.append(x.clone()) or real(x, m))
    before = alg.actor.obs_normalizer.mean.clone()
    raw = []
    with torch.inference_mode():
        for _ in range(24):
            raw.append(obs["policy"].clone())
            a = alg.act(obs)
            obs, r, d, ex = env.step(a)
            alg.process_env_step(obs, r, d, ex)
        alg.compute_returns(obs)
    assert calls == [] and torch.equal(alg.actor.obs_normalizer.mean, before)  # frozen while collecting
    alg.update()
    assert len(calls) == 1
    torch.testing.assert_close(calls[0], torch.stack(raw).flatten(0, 1))  # raw, not normalized, observations


def test_bootstrap_value_uses_the_reference_observations():
    alg, env, obs = make(num_envs=4)
    with torch.inference_mode():
        alg.act(obs)
        next_obs, rewards, _, extras = env.step(torch.zeros(4, 2))
    final = next_obs.clone()
    final["critic_reference"] = torch.randn_like(final["critic_reference"])
    extras = {"time_outs": torch.ones(4, dtype=torch.bool), "final_observations": final}
    with torch.inference_mode():
        alg.process_env_step(next_obs, rewards, torch.ones(4, dtype=torch.bool), extras)
    with torch.no_grad():
        expected = alg.critic(final["critic"], final["critic_reference"], final["critic_reference_mask"])
        without_ref = alg.critic(final["critic"])
    torch.testing.assert_close(alg.storage.get()["bootstrap_values"][0], expected)
    assert not torch.allclose(expected, without_ref)


def test_mirror_loss_zero_for_equivariant_and_positive_for_invariant_policy():
    sym = Symmetry(mirror_obs=lambda x: -x, mirror_actions=lambda a: -a, use_mirror_loss=True, mirror_loss_coeff=1.0)
    obs = torch.randn(32, 5)
    equivariant = Actor(5, 3, hidden_dims=[16, 16], activation="tanh", obs_normalization=False)
    with torch.no_grad():  # tanh MLP without biases is odd: pi(-s) = -pi(s)
        for name, p in equivariant.mlp.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            else:
                p.normal_()
    invariant = Actor(5, 3, hidden_dims=[16], obs_normalization=False)
    with torch.no_grad():  # a constant policy: pi(-s) = pi(s) = c != -c
        for name, p in invariant.mlp.named_parameters():
            p.zero_() if name.endswith("weight") else p.fill_(0.5)
    for actor, positive in ((equivariant, False), (invariant, True)):
        mean, _ = actor.distribution(obs)
        loss = sym.mirror_loss(actor, obs, None, None, mean)
        if positive:
            torch.testing.assert_close(loss, torch.tensor(1.0))  # (0.5 - (-0.5))^2
        else:
            assert loss.abs() < 1e-10
