"""MMPPO's add-ons are extension objects with hooks; ``class_name`` resolves through a registry."""

from __future__ import annotations

import pytest
import torch
from helpers import rollout, toy_cfg

from mimic_rl.algorithms import MMPPO, Extension, register
from mimic_rl.algorithms.amp import AmpExtension
from mimic_rl.algorithms.rnd import RndExtension
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.models import Actor


class BonusAndPenalty(Extension):
    """A user's extension: a constant reward bonus at collection, an L2 penalty on the action mean in the update."""

    name = "bonus"

    def __init__(self, bonus: float, coef: float) -> None:
        self.bonus, self.coef, self.updates = bonus, coef, 0

    def on_step(self, alg, next_obs, rewards):
        return rewards + self.bonus

    def policy_terms(self, alg, streams, out):
        return {"mean_l2": out.mean[: out.n].square().sum(-1).mean()}

    def policy_loss(self, alg, terms):
        return self.coef * terms["mean_l2"]

    def after_update(self, alg):
        self.updates += 1

    def state_dict(self):
        return {"bonus_updates": self.updates}

    def load_state_dict(self, state, strict=True):
        self.updates = state.get("bonus_updates", 0)


def make(seed=0, **cfg):
    torch.manual_seed(seed)
    env = PointMassTrackingEnv(num_envs=16, seed=seed)
    obs = env.get_observations()
    return MMPPO.construct_algorithm(obs, env, cfg.pop("cfg", None) or toy_cfg(**cfg), "cpu"), env, obs


def test_an_extension_of_its_own_shapes_rewards_and_loss_through_the_hooks():
    ext = BonusAndPenalty(bonus=0.5, coef=0.3)
    cfg = toy_cfg()
    cfg["extensions"] = [ext]
    alg, env, obs = make(cfg=cfg)
    assert alg.extensions == [ext]
    with torch.inference_mode():
        alg.act(obs)
        _, rewards, dones, extras = env.step(alg.transition["action_mean"])
        alg.process_env_step(_, rewards, dones, extras)
    stored = alg.storage.get()["rewards"][0].squeeze(-1)
    torch.testing.assert_close(stored, rewards + 0.5)  # the bonus reached the storage
    alg.storage.clear()
    rollout(alg, env, obs, 24)
    batch = next(alg.storage.mini_batches(1, 1))
    terms, _ = alg._policy_terms(batch)
    mean = alg.actor.distribution(*alg.obs_groups.actor_inputs(batch["obs"]))[0]
    torch.testing.assert_close(terms["mean_l2"], mean.square().sum(-1).mean())  # a second computation of the term
    base = terms["surrogate"] + terms["value"] - alg.entropy_coef * terms["entropy"]
    torch.testing.assert_close(alg._policy_loss(terms), base + 0.3 * terms["mean_l2"])
    out = alg.update()
    assert "mean_l2" in out and ext.updates == 1
    assert alg.save()["bonus_updates"] == 1
    fresh = BonusAndPenalty(bonus=0.5, coef=0.3)
    cfg["extensions"] = [fresh]
    other, _, _ = make(cfg=cfg)
    other.load(alg.save())  # every part, extensions included, by default
    assert fresh.updates == 1


def test_the_built_in_extensions_run_in_a_fixed_order_and_own_their_modules():
    amp = {
        "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
        "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor",
    }
    alg, _, _ = make(amp_cfg=amp, rnd_cfg={"weight": 0.1})
    assert [type(e) for e in alg.extensions] == [AmpExtension, RndExtension]
    assert alg.amp is alg.extensions[0].amp and alg.rnd is alg.extensions[1].rnd
    assert alg._modules()[2:] == [alg.amp.discriminator, alg.rnd]
    plain, _, _ = make()
    assert plain.extensions == [] and plain.amp is None and plain.rnd is None and plain.symmetry is None
    state = alg.save()
    assert {"amp_state_dict", "rnd_state_dict", "rnd_optimizer_state_dict"} <= set(state)
    with pytest.raises(ValueError, match="unknown key"):
        alg.load(state, {"actor": True, "style": True})


class WideActor(Actor):
    """A registered subclass of ``Actor`` (what a user's ``class_name`` would name)."""


register("model", "WideActor")(WideActor)


def test_class_name_selects_a_registered_class_and_names_the_choices_otherwise():
    cfg = toy_cfg()
    cfg["algorithm"]["class_name"] = "MMPPO"
    cfg["actor"]["class_name"] = "WideActor"
    alg, _, _ = make(cfg=cfg)
    assert type(alg) is MMPPO and type(alg.actor) is WideActor
    for section, name, message in (
        ("algorithm", "PPO2", r"class_name 'PPO2' is not registered; expected one of \['Distillation', 'MMPPO'\]"),
        ("actor", "Transformer", r"class_name 'Transformer' is not registered"),
        ("critic", "WideActor", r"must name 'Critic' or a registered subclass of it"),
        ("algorithm", "Distillation", r"must name 'MMPPO' or a registered subclass of it"),
    ):
        cfg = toy_cfg()
        cfg[section]["class_name"] = name
        with pytest.raises(ValueError, match=message):
            make(cfg=cfg)
