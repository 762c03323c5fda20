"""obs_groups: which observation groups each model reads, resolved once; the same training under other group names."""

from __future__ import annotations

import pytest
import torch
from helpers import rollout, toy_cfg
from tensordict import TensorDict

from mimic_rl.algorithms import MMPPO
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.models.obs_groups import ObsGroups


def _obs(**groups):
    n = 3
    return TensorDict({k: torch.zeros(n, *shape) for k, shape in groups.items()}, batch_size=[n])


def test_defaults_for_the_embedded_env_groups():
    obs = _obs(policy=(4,), reference=(3, 5), reference_mask=(), critic=(6,), critic_reference=(3, 7))
    g = ObsGroups.resolve(None, obs)
    assert g == ObsGroups(("policy",), "reference", "reference_mask", ("critic",), "critic_reference", None)
    assert g.shapes(obs) == {"actor": 4, "actor_reference": (3, 5), "critic": 6, "critic_reference": (3, 7)}


def test_defaults_for_rsl_rl_style_groups_have_no_reference():
    g = ObsGroups.resolve(None, _obs(actor=(160,), critic=(286,)))
    assert g == ObsGroups(("actor",), None, None, ("critic",), None, None)
    g = ObsGroups.resolve(None, _obs(policy=(7,)))  # no critic group: the critic reads the actor's groups
    assert g.critic == ("policy",) and g.critic_reference is None


def test_explicit_mapping_concatenates_groups_in_order():
    obs = TensorDict(
        {"a": torch.arange(6.0).reshape(3, 2), "b": 10 + torch.arange(3.0).reshape(3, 1), "ref": torch.ones(3, 2, 2)},
        batch_size=[3],
    )
    g = ObsGroups.resolve({"actor": ["b", "a"], "actor_reference": "ref", "critic": ["a"]}, obs)
    x, ref, mask = g.actor_inputs(obs)
    assert x.tolist() == [[10, 0, 1], [11, 2, 3], [12, 4, 5]]
    assert ref is obs["ref"] and mask is None
    assert g.critic_inputs(obs)[1] is obs["ref"]  # the critic shares the actor's reference unless told otherwise
    assert g.to_dict()["actor"] == ["b", "a"]


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"actor": ["nope"]}, "obs_groups.actor: the env has no observation group 'nope'; its groups are"),
        ({"policy": ["policy"]}, "obs_groups: unknown key 'policy'; allowed keys"),
        ({"actor_reference": ["reference", "policy"]}, "expected one group name"),
    ],
)
def test_bad_mappings_name_the_problem(mapping, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ObsGroups.resolve(mapping, _obs(policy=(4,), reference=(3, 5)))


class _Renamed:
    """The toy env with its groups under other names (as mjlab names them: ``actor``, ``critic``, ...)."""

    NAMES = {"policy": "actor", "reference": "ref_frames", "reference_mask": "ref_valid", "critic": "value_obs"}

    def __init__(self, env):
        self.env = env
        self.num_envs, self.num_actions, self.device = env.num_envs, env.num_actions, env.device

    def _rename(self, obs):
        return TensorDict(
            {self.NAMES.get(k, k): v for k, v in obs.items() if k in self.NAMES}, batch_size=obs.batch_size
        )

    def get_observations(self):
        return self._rename(self.env.get_observations())

    def step(self, actions):
        obs, rewards, dones, extras = self.env.step(actions)
        extras = dict(extras)
        if "final_observations" in extras:
            extras["final_observations"] = self._rename(extras["final_observations"])
        return self._rename(obs), rewards, dones, extras


def _train(env, cfg, iterations=3):
    torch.manual_seed(0)
    obs = env.get_observations()
    alg = MMPPO.construct_algorithm(obs, env, cfg, "cpu")
    losses = []
    for _ in range(iterations):
        obs, _ = rollout(alg, env, obs, 24)
        losses.append(alg.update())
    return alg, losses


def test_training_under_other_group_names_is_bitwise_the_same():
    """A second implementation of the same run: the toy's groups renamed, with an obs_groups mapping to match."""
    env = PointMassTrackingEnv(num_envs=16, seed=0)  # the toy's own names, restricted to the renamed groups
    observe, step = env.get_observations, env.step
    env.get_observations = lambda: observe().select(*_Renamed.NAMES)

    def plain_step(actions):
        obs, rewards, dones, extras = step(actions)
        extras = dict(extras)
        extras["final_observations"] = extras["final_observations"].select(*_Renamed.NAMES)
        return obs.select(*_Renamed.NAMES), rewards, dones, extras

    env.step = plain_step
    _, reference = _train(env, toy_cfg())
    mapping = {"actor": ["actor"], "actor_reference": "ref_frames", "actor_reference_mask": "ref_valid"}
    mapping["critic"] = ["value_obs"]
    cfg = {**toy_cfg(), "obs_groups": mapping}
    alg, renamed = _train(_Renamed(PointMassTrackingEnv(num_envs=16, seed=0)), cfg)
    assert alg.obs_groups.actor == ("actor",) and alg.obs_groups.critic == ("value_obs",)
    assert renamed == reference
    # one name from env to loss: the storage and its mini-batches hold the env's groups under the env's names
    names = ["actor", "ref_frames", "ref_valid", "value_obs"]
    stored = alg.storage.get()["obs"]
    assert list(stored.keys()) == names and stored["ref_valid"].dtype == torch.bool
    env = _Renamed(PointMassTrackingEnv(num_envs=16, seed=1))
    rollout(alg, env, env.get_observations(), 24)
    batch = next(alg.storage.mini_batches(4, 1))
    assert sorted(batch["obs"].keys()) == sorted(names) and batch["obs"].batch_size == (96,)
