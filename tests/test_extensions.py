"""MMPPO's add-ons are extension objects with hooks; ``class_name`` resolves through a registry."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from helpers import rollout, toy_cfg

from mimic_rl.algorithms import MMPPO, Extension, register, register_extension
from mimic_rl.algorithms.amp import AMP
from mimic_rl.algorithms.rnd import RandomNetworkDistillation
from mimic_rl.config import ConfigError, load_config
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.models import Actor
from mimic_rl.runners import OnPolicyRunner, load_checkpoint


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
    assert [type(e) for e in alg.extensions] == [AMP, RandomNetworkDistillation]
    assert alg.amp is alg.extensions[0] and alg.rnd is alg.extensions[1]
    assert alg._modules()[2:] == [alg.amp.discriminator, alg.rnd.net]
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


@dataclass
class ActionL2Config:
    """The config section of the test's own extension: one weight."""

    coef: float = 0.1


@register_extension  # the one registry line: `algorithm: {action_l2_cfg: {...}}` now turns it on
class ActionL2(Extension):
    """An extension defined only in this file: an L2 penalty on the actor's mean, a counter in the checkpoint."""

    name = "action_l2"
    config_key = "action_l2_cfg"
    Config = ActionL2Config

    def __init__(self, cfg: ActionL2Config) -> None:
        self.coef, self.updates = cfg.coef, 0

    @classmethod
    def build(cls, cfg, ctx):
        return cls(cfg)

    def policy_terms(self, alg, streams, out):
        return {"action_l2": out.mean[: out.n].square().sum(-1).mean()}

    def policy_loss(self, alg, terms):
        return self.coef * terms["action_l2"]

    def after_update(self, alg):
        self.updates += 1

    def state_dict(self):
        return {"action_l2_updates": self.updates}

    def load_state_dict(self, state, strict=True):
        self.updates = state.get("action_l2_updates", 0)


def _runner_cfg(**algorithm):
    cfg = load_config("tracking_ppo")
    cfg.runner.num_steps_per_env, cfg.runner.logger, cfg.runner.save_interval = 8, "none", 1000
    cfg.algorithm.update(num_mini_batches=2, num_learning_epochs=2, **algorithm)
    cfg.actor, cfg.critic = {"hidden_dims": [32], "init_noise_std": 0.5}, {"hidden_dims": [32]}
    return cfg


def test_an_extension_defined_in_a_test_file_is_one_config_entry_and_trains(tmp_path):
    """Breakage caught: a registered extension that the config cannot turn on, that never reaches the loss or the
    logs, or whose state is not saved; a typo in its section that passes silently."""
    torch.manual_seed(0)
    runner = OnPolicyRunner(_runner_cfg(action_l2_cfg={"coef": 0.5}), tmp_path, env=PointMassTrackingEnv(num_envs=8))
    out = runner.learn(2)
    ext = runner.alg.action_l2
    assert isinstance(ext, ActionL2) and ext.coef == 0.5 and runner.alg.extensions == [ext]
    assert ext.updates == 2 and out["loss/action_l2"] > 0  # its hooks ran in both updates, its term is logged
    assert load_checkpoint(tmp_path / "model_2.pt")["action_l2_updates"] == 2  # its state is in the checkpoint
    torch.manual_seed(0)
    off = OnPolicyRunner(_runner_cfg(), None, env=PointMassTrackingEnv(num_envs=8))
    off.learn(2)
    assert off.alg.action_l2 is None and off.alg.extensions == []
    changed = [not torch.equal(a, b) for a, b in zip(runner.alg.actor.parameters(), off.alg.actor.parameters())]
    assert any(changed)  # the penalty reached the actor's gradient
    message = r"^algorithm\.action_l2_cfg\.cof: unknown key; did you mean algorithm\.action_l2_cfg\.coef\?$"
    with pytest.raises(ConfigError, match=message):
        _runner_cfg(action_l2_cfg={"cof": 0.5}).validate()


def test_an_extension_section_is_checked_against_its_config_dataclass():
    """Breakage caught: typos and wrong types in a built-in extension's section reaching training silently."""
    with pytest.raises(
        ConfigError,
        match=r"algorithm\.amp_cfg\.styl_weight: unknown key; did you mean algorithm\.amp_cfg\.style_weight\?",
    ):
        _runner_cfg(amp_cfg={"styl_weight": 0.1}).validate()
    with pytest.raises(ConfigError, match=r"rnd_cfg\.learning_rate: expected a number > 0, found -1"):
        _runner_cfg(rnd_cfg={"learning_rate": -1}).validate()
    with pytest.raises(ConfigError, match=r"dagger_cfg\.loss: expected one of \['mse', 'kl'\], found 'l1'"):
        _runner_cfg(dagger_cfg={"teacher": "x.pt", "loss": "l1"}).validate()
