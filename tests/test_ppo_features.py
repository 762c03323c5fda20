"""MMPPO features: non-finite guard, strict configs, checkpoints, teachers, symmetry, encoders, sequence modes."""

from __future__ import annotations

import pytest
import torch
from helpers import rollout, toy_cfg
from tensordict import TensorDict

from mimic_rl.algorithms import MMPPO, Symmetry
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.errors import TrainingDiverged


def make(num_envs=16, seed=0, cfg=None, **algorithm):
    torch.manual_seed(seed)
    env = PointMassTrackingEnv(num_envs=num_envs, seed=seed)
    obs = env.get_observations()
    alg = MMPPO.construct_algorithm(obs, env, cfg or toy_cfg(**algorithm), "cpu")
    return alg, env, obs


def test_a_non_finite_mini_batch_is_skipped_and_counted():
    alg, env, obs = make()
    rollout(alg, env, obs, 24)
    alg.storage.get()["advantages"][3, 2] = float("nan")  # one sample: one mini-batch per epoch goes bad
    out = alg.update()
    assert out["nonfinite_batches"] == alg.num_learning_epochs
    assert all(torch.isfinite(p).all() for p in alg.actor.parameters())


def test_a_critic_learning_rate_of_its_own_is_not_scheduled():
    """The adaptive KL schedule moves the actor's rate; a critic with its own rate keeps it (by default both share
    one rate, as in rsl_rl)."""
    alg, env, obs = make(critic_learning_rate=3e-4, learning_rate=1e-5, desired_kl=1e-9)  # KL is always too high
    rollout(alg, env, obs, 24)
    alg.update()
    actor, critic = alg.optimizer.param_groups
    assert actor["lr"] == 1e-5 and critic["lr"] == 3e-4  # the actor's rate sits at its floor, the critic's is kept
    assert {id(p) for p in critic["params"]} == {id(p) for p in alg.critic.parameters()}
    shared, env, obs = make(learning_rate=1e-3, desired_kl=1e-9)
    rollout(shared, env, obs, 24)
    shared.update()
    assert [g["lr"] for g in shared.optimizer.param_groups] == [shared.learning_rate] * 2
    assert shared.learning_rate < 1e-3


def test_consecutive_non_finite_batches_raise_naming_the_term():
    alg, env, obs = make()
    rollout(alg, env, obs, 24)
    alg.storage.get()["advantages"].fill_(float("nan"))
    with pytest.raises(FloatingPointError, match=r"3 consecutive mini-batches.*\['surrogate'\]"):
        alg.update()


@pytest.mark.parametrize(
    "section,key",
    [("algorithm", "learning_rat"), ("actor", "hidden_dim"), ("critic", "init_noise_std"), ("algorithm", "device")],
)
def test_unknown_or_reserved_config_keys_are_rejected(section, key):
    cfg = toy_cfg()
    cfg[section][key] = 1
    with pytest.raises(ValueError, match=repr(key)):
        make(cfg=cfg)


def test_save_load_round_trip_restores_everything():
    alg, env, obs = make(rnd_cfg={"weight": 0.1}, amp_cfg={
        "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
        "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor"})  # fmt: skip
    rollout(alg, env, obs, 24)
    alg.update()
    state = alg.save()
    fresh, _, _ = make(seed=5, rnd_cfg={"weight": 0.1}, amp_cfg=alg.amp and {
        "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
        "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor"})  # fmt: skip
    assert fresh.load(state) is True
    for a, b in ((alg.actor, fresh.actor), (alg.critic, fresh.critic), (alg.rnd.net, fresh.rnd.net)):
        assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    disc_a, disc_b = alg.amp.discriminator.state_dict(), fresh.amp.discriminator.state_dict()
    assert all(torch.equal(v, disc_b[k]) for k, v in disc_a.items())
    assert fresh.learning_rate == alg.learning_rate and fresh.iteration == alg.iteration == 1
    assert fresh.optimizer.state_dict()["state"].keys() == alg.optimizer.state_dict()["state"].keys()
    with pytest.raises(ValueError, match="unknown key"):
        fresh.load(state, {"actor": True, "policy": True})
    assert fresh.load(state, {"actor": True}) is False


def test_dagger_teacher_from_this_package_checkpoint(tmp_path):
    teacher_alg, env, obs = make()
    path = tmp_path / "teacher.pt"
    torch.save(teacher_alg.save(), path)
    alg, env, obs = make(seed=2, dagger_cfg={"teacher": str(path), "coef": 0.5})
    labels = alg.dagger.label(obs)
    expected = teacher_alg.actor(obs["policy"], obs["reference"], obs["reference_mask"])
    torch.testing.assert_close(labels, expected)
    rollout(alg, env, obs, 24)
    assert torch.equal(alg.storage.get()["dagger_actions"][0], labels)
    assert "imitation" in alg.update()


def test_dagger_teacher_from_an_rsl_rl_checkpoint(tmp_path):
    pytest.importorskip("rsl_rl")
    from rsl_rl.models import MLPModel

    env = PointMassTrackingEnv(num_envs=16, seed=0)
    obs = env.get_observations()
    groups = {"actor": ["policy", "critic"], "critic": ["critic"]}
    dist = {"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 0.3}
    teacher = MLPModel(obs, groups, "actor", 2, hidden_dims=[32, 16], obs_normalization=True, distribution_cfg=dist)
    teacher.train()
    teacher.update_normalization(TensorDict({k: obs[k] * 3 + 1 for k in ("policy", "critic")}, batch_size=[16]))
    teacher.eval()
    path = tmp_path / "model_100.pt"
    torch.save({"actor_state_dict": teacher.state_dict(), "iter": 100}, path)
    dagger = {"teacher": str(path), "teacher_obs_groups": ["policy", "critic"], "loss": "kl"}
    alg, _, _ = make(dagger_cfg=dagger)
    with torch.no_grad():
        torch.testing.assert_close(alg.dagger.label(obs), teacher(obs))
    torch.testing.assert_close(alg.dagger.teacher.std(), torch.full((2,), 0.3))
    with pytest.raises(ValueError, match=r"layer mlp\.0\.weight expects input dim 9.*\['policy'\] give 4"):
        make(dagger_cfg={**dagger, "teacher_obs_groups": ["policy"]})[0].dagger.label(obs)


def test_symmetry_augmentation_doubles_the_batch_consistently():
    mirror = lambda x: -x  # noqa: E731
    sym = Symmetry(mirror_obs=mirror, mirror_actions=lambda a: a.flip(-1), mirror_reference=mirror,
                   use_data_augmentation=True)  # fmt: skip
    g = torch.Generator().manual_seed(0)
    s = {k: torch.randn(5, 3, generator=g) for k in ("obs", "critic_obs", "actions", "action_mean", "dagger_actions")}
    s.update({k: torch.randn(5, 1, generator=g) for k in ("advantages", "returns", "values", "actions_log_prob")})
    s["action_std"] = torch.rand(5, 3, generator=g)
    s["reference"] = (torch.randn(5, 2, 4, generator=g), torch.tensor([True, False, True, True, False]))
    s["critic_reference"] = None
    out = sym.augment(s)
    assert torch.equal(out["obs"], torch.cat((s["obs"], -s["obs"])))
    assert torch.equal(out["actions"][5:], s["actions"].flip(-1))
    assert torch.equal(out["action_std"][5:], s["action_std"].flip(-1))
    assert torch.equal(out["advantages"], s["advantages"].repeat(2, 1))
    assert torch.equal(out["reference"][0][5:], -s["reference"][0])
    assert torch.equal(out["reference"][1], s["reference"][1].repeat(2))


@pytest.mark.parametrize(
    "mode,max_len", [("trajectory", None), ("chunked", 8), ("fifty_percent_overlapping", 8), ("maximum", 4)]
)
def test_recurrent_update_with_every_sequence_mode(mode, max_len):
    cfg = toy_cfg(sequence_mode=mode, max_seq_len=max_len, num_mini_batches=2, num_learning_epochs=1)
    cfg["actor"].update(rnn_type="lstm", rnn_hidden_dim=16)
    cfg["critic"].update(rnn_type="gru", rnn_hidden_dim=16)
    alg, env, obs = make(cfg=cfg)
    before = [p.clone() for p in alg.actor.parameters()]
    rollout(alg, env, obs, 24)
    out = alg.update()
    assert out["nonfinite_batches"] == 0
    assert any(not torch.equal(a, b) for a, b in zip(before, alg.actor.parameters()))


def test_transformer_reference_encoder_trains_and_the_policy_reads_the_reference():
    """After one update every parameter of the actor's transformer encoder got a non-zero gradient and moved; the
    actor's mean then depends on a late reference frame of its own env (and not on other envs'), and not on the
    reference of an env whose ``reference_mask`` is False, while that mask itself changes the mean.

    Catches: an encoder output detached from the loss or left out of the optimizer, an encoder that ignores some
    frames (or all: a policy blind to the reference), rows mixed across envs, a mask that is not applied."""
    cfg = toy_cfg(num_mini_batches=2, num_learning_epochs=1)
    cfg["actor"]["reference_encoder"] = {"type": "transformer", "d_model": 32, "num_heads": 2, "num_layers": 1}
    alg, env, obs = make(cfg=cfg)
    encoder = alg.actor.encoder
    before = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    rollout(alg, env, obs, 24)
    assert alg.update()["nonfinite_batches"] == 0
    for name, p in encoder.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name
        assert not torch.equal(p.detach(), before[name]), name
    obs = env.get_observations()
    policy, ref, mask = obs["policy"], obs["reference"].clone(), obs["reference_mask"].clone()
    assert bool(mask.all())
    with torch.no_grad():
        mean = alg.actor(policy, ref, mask)
        moved = ref.clone()
        moved[3, -1] += 0.5  # the last future frame of env 3
        other = alg.actor(policy, moved, mask)
        assert float((other[3] - mean[3]).abs().max()) > 1e-5
        assert torch.equal(torch.cat((other[:3], other[4:])), torch.cat((mean[:3], mean[4:])))
        mask[3] = False
        hidden = alg.actor(policy, ref, mask)
        assert float((hidden[3] - mean[3]).abs().max()) > 1e-5  # the mask is an input of the policy
        assert torch.equal(alg.actor(policy, moved, mask)[3], hidden[3])  # a masked-out reference is never read


def test_rnd_weight_schedule_scales_the_intrinsic_reward():
    alg, _, obs = make(rnd_cfg={"weight": {"mode": "linear", "initial": 1.0, "final": 0.0, "end": 10}})
    states = obs["policy"]
    r0 = alg.rnd.intrinsic_reward(states, 0)
    torch.testing.assert_close(alg.rnd.intrinsic_reward(states, 5), 0.5 * r0)
    assert torch.all(alg.rnd.intrinsic_reward(states, 10) == 0)


def test_logged_terms_are_means_over_the_mini_batches_that_had_them():
    """AMP stepping every 2nd mini-batch: its logged terms are the mean over its own steps (before, the sum over
    them was divided by every mini-batch, halving them), the PPO terms the mean over all mini-batches."""
    amp = {"amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
           "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor", "update_interval": 2}  # fmt: skip
    alg, env, obs = make(cfg=toy_cfg(num_mini_batches=4, num_learning_epochs=2, amp_cfg=amp))
    totals, surrogates = [], []
    losses, policy_terms = alg.amp.losses, alg._policy_terms

    def record_amp(*args):
        out = losses(*args)
        totals.append(float(out["amp_total"].detach()))
        return out

    def record_ppo(batch):
        terms, kl = policy_terms(batch)
        surrogates.append(float(terms["surrogate"].detach()))
        return terms, kl

    alg.amp.losses, alg._policy_terms = record_amp, record_ppo
    rollout(alg, env, obs, 24)
    out = alg.update()
    assert len(surrogates) == 8 and len(totals) == 4 and out["nonfinite_batches"] == 0
    assert out["amp_total"] == pytest.approx(sum(totals) / 4, rel=1e-5)
    assert out["surrogate"] == pytest.approx(sum(surrogates) / 8, rel=1e-5, abs=1e-7)


def test_a_non_finite_discriminator_gradient_under_a_finite_loss_is_caught():
    """The discriminator's gradient check: a NaN that appears only in one of its parameters' gradients (every loss
    term finite) skips the mini-batch, and three in a row stop training with an error that says so."""
    amp = {"amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
           "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor"}  # fmt: skip
    alg, env, obs = make(cfg=toy_cfg(amp_cfg=amp, num_mini_batches=2, num_learning_epochs=1))
    rollout(alg, env, obs, 24)
    bias = alg.amp.discriminator.net.last.bias
    before = [p.detach().clone() for p in (*alg.actor.parameters(), *alg.amp.discriminator.parameters())]
    hook = bias.register_hook(lambda g: torch.full_like(g, float("nan")))
    out = alg.update()
    assert out["nonfinite_batches"] == 2  # both mini-batches skipped: nothing stepped
    after = [*alg.actor.parameters(), *alg.amp.discriminator.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    rollout(alg, env, obs, 24)
    with pytest.raises(TrainingDiverged, match=r"the gradient \(all loss terms were finite\)"):
        alg.update()
    hook.remove()
