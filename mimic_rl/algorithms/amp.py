"""Adversarial motion priors: a discriminator over (s_prev, s) feature pairs and the style reward it gives.

Losses: ``"bce"`` (logits, optional label smoothing), ``"lsgan"`` (targets +1 expert / -1 policy) or ``"wgan"``. An R1
gradient penalty is taken on **expert** pairs only. Features are normalized by a running normalizer that is updated
once per iteration. The discriminator has its own optimizer with weight decay on the output layer. Invalid pairs
(crossing a reset, or without a reference) are masked out of every term.

One extension, one file: ``AmpConfig`` (the ``algorithm.amp_cfg`` section), how it is built, its hooks (the style
reward at collection, the discriminator step per mini-batch, the feature normalizer after the update) and its state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import torch
from tensordict import TensorDictBase
from torch import nn
from torch.nn import functional as F

from mimic_rl.algorithms.extensions import BuildContext, Extension, Host, SideLoss, flat_rows, register_extension
from mimic_rl.algorithms.optimizers import make_optimizer
from mimic_rl.errors import ConfigError
from mimic_rl.models.discriminator import Discriminator
from mimic_rl.storage.amp_pairs import AmpPairExtractor, AmpPairs
from mimic_rl.utils import Range, resolve_callable

__all__ = ["AMP", "AmpConfig", "Discriminator"]

_LOSSES = ("bce", "lsgan", "wgan")
Callback = str | Callable[..., Any] | None


@dataclass
class AmpConfig:
    """``algorithm.amp_cfg``: the discriminator, its training, the reward mix and the feature extractors."""

    num_features: Annotated[int | None, Range(1)] = None
    """Features per state; None: inferred from ``amp_obs_extractor`` on the env's observations."""
    hidden_dims: tuple[int, ...] = (256, 128)
    activation: str = "relu"
    loss_type: Literal["bce", "lsgan", "wgan"] = "lsgan"
    label_smoothing: Annotated[float, Range(0, 0.5)] = 0.0
    gradient_penalty_coef: Annotated[float, Range(0)] = 5.0
    learning_rate: Annotated[float, Range(0, low_exclusive=True)] = 1e-4
    output_weight_decay: Annotated[float, Range(0)] = 1e-4
    weight_decay: Annotated[float, Range(0)] = 0.0
    pretrain_steps: Annotated[int, Range(0)] = 0
    """Discriminator steps on the first rollout, before any policy update."""
    update_interval: Annotated[int, Range(1)] = 1
    """One discriminator step every this many mini-batches."""
    batch_size: Annotated[int | None, Range(1)] = 2048
    """Pairs per discriminator step: larger mini-batches are subsampled (as IsaacGymEnvs' amp_batch_size)."""
    replay_buffer_size: Annotated[int, Range(0)] = 0
    task_weight: float = 1.0
    style_weight: float = 1.0
    style_reward_scale: float = 1.0
    amp_obs_extractor: Callback = None
    """``f(stored observations) -> [M, F]`` robot features (``"module:function"`` or a callable); None: identity."""
    amp_ref_obs_extractor: Callback = None
    """``f((reference, mask)) -> (features, mask)`` of the expert; None: identity."""
    expert_sampler: Callback = None
    """``f(num) -> (prev, cur)`` expert pairs; ``"env"``: the env's ``amp_expert_sampler``. Given, it replaces the
    reference stream's pairs; default: the reference stream's pairs, or the env's sampler where the actor reads no
    reference or the env's ``amp_pairs_from_env`` says that its ``amp`` group is not in the reference's layout."""
    reference_groups: tuple[str | None, ...] | None = None
    """The ``(reference, mask)`` groups of stored observations whose pairs are the expert's (the seed storage's own
    pairs); MMPPO uses the groups the actor reads."""


@register_extension
class AMP(Extension):
    """Discriminator, its optimizer, an optional replay buffer of policy pairs, the style reward, and MMPPO's hooks.

    ``task_weight * r_task + style_weight * r_style`` is what the algorithm stores as the reward.
    """

    name = "amp"
    config_key = "amp_cfg"
    Config = AmpConfig
    build_rank = 30
    hook_rank = 30
    previous_keys = ("obs",)

    def __init__(
        self,
        cfg: AmpConfig | None = None,
        *,
        pairs: AmpPairExtractor | None = None,
        device: str | torch.device = "cpu",
        **fields: Any,
    ) -> None:
        """``cfg`` (or its fields as keywords, e.g. ``AMP(num_features=5, loss_type="bce")``); ``pairs`` extracts
        the features and pairs of stored observations (MMPPO's hooks need it)."""
        cfg = self.config_of(cfg, fields)
        if cfg.loss_type not in _LOSSES:
            raise ValueError(f"amp_cfg['loss_type'] must be one of {_LOSSES}, got {cfg.loss_type!r}")
        if cfg.update_interval < 1 or cfg.pretrain_steps < 0 or cfg.replay_buffer_size < 0:
            raise ValueError("amp_cfg: need update_interval >= 1, pretrain_steps >= 0, replay_buffer_size >= 0")
        if cfg.num_features is None:
            raise ValueError("amp_cfg needs 'num_features' (construct_algorithm infers it from the extractor)")
        self.cfg = cfg
        self.device = torch.device(device)
        self.discriminator = Discriminator(cfg.num_features, cfg.hidden_dims, cfg.activation).to(self.device)
        self.loss_type = cfg.loss_type
        self.label_smoothing = float(cfg.label_smoothing)
        self.gradient_penalty_coef = float(cfg.gradient_penalty_coef)
        self.pretrain_steps = int(cfg.pretrain_steps)
        self.update_interval = int(cfg.update_interval)
        self.batch_size = None if cfg.batch_size is None else int(cfg.batch_size)
        self.task_weight = float(cfg.task_weight)
        self.style_weight = float(cfg.style_weight)
        self.style_reward_scale = float(cfg.style_reward_scale)
        sampler = cfg.expert_sampler
        self.expert_sampler = resolve_callable(sampler, "amp_cfg['expert_sampler']") if sampler else None
        self.optimizer = self._make_optimizer(cfg)
        self.replay_size = int(cfg.replay_buffer_size)
        self._replay = torch.zeros(self.replay_size, 2, cfg.num_features, device=self.device)
        self._replay_count = 0
        self._replay_next = 0
        self.num_steps = 0
        self._sets: tuple[tuple, torch.Tensor, torch.Tensor] | None = None
        self.pairs = pairs
        """The extractors (resolved once): the robot's features of stored observations, and the mini-batch pairs."""
        self._prev: torch.Tensor | None = None
        self._expert_states: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    def _make_optimizer(self, cfg: AmpConfig) -> torch.optim.Optimizer:
        """Adam with weight decay ``weight_decay`` on the trunk and ``output_weight_decay`` on the output layer."""
        net = self.discriminator.net
        trunk = [p for n, p in net.named_parameters() if not n.startswith(f"{len(net) - 1}.")]
        groups = [
            {"params": trunk, "weight_decay": cfg.weight_decay},
            {"params": list(net.last.parameters()), "weight_decay": cfg.output_weight_decay},
        ]
        return make_optimizer("adam", groups, cfg.learning_rate, self.device)

    # ------------------------------------------------------------------ construction from a config
    @classmethod
    def prepare(cls, cfg: AmpConfig, obs: TensorDictBase, env: Any, obs_groups: Any) -> AmpConfig:
        """The env's expert sampler when the actor reads no reference or the env asks for it (``amp_pairs_from_env``),
        and ``num_features`` from the extractor."""
        if cfg.expert_sampler == "env":
            if not hasattr(env, "amp_expert_sampler"):
                raise ConfigError(
                    f"algorithm.amp_cfg.expert_sampler: 'env', but {type(env).__name__} has no amp_expert_sampler; "
                    "remove it to use the reference stream's pairs"
                )
            cfg = replace(cfg, expert_sampler=env.amp_expert_sampler)
        own_pairs = obs_groups.actor_reference is None or getattr(env, "amp_pairs_from_env", False)
        if own_pairs and not cfg.expert_sampler and hasattr(env, "amp_expert_sampler"):
            cfg = replace(cfg, expert_sampler=env.amp_expert_sampler)  # no reference stream, or not in the amp layout
        if cfg.num_features is None:
            try:
                groups = (*obs_groups.stored(), *cls.stored_groups(obs, obs_groups))
                features = _extractor(cfg, env).features(obs.select(*groups))
            except KeyError as exc:
                raise ConfigError(
                    f"algorithm.amp_cfg.amp_obs_extractor: expected the observation group it reads, found the env's "
                    f"groups {sorted(obs.keys())} ({exc}); use an env with an amp group (on mjlab: "
                    "MimicRL-Tracking-G1-AMP)"
                ) from None
            cfg = replace(cfg, num_features=int(features.shape[-1]))
        return cfg

    @classmethod
    def stored_groups(cls, obs: TensorDictBase, obs_groups: Any) -> tuple[str, ...]:
        """The env's ``amp`` group, if it has one."""
        return ("amp",) if "amp" in obs.keys() else ()

    @classmethod
    def build(cls, cfg: AmpConfig, ctx: BuildContext) -> AMP:
        """The discriminator and the pairs of ``ctx.rollout``'s stored observations."""
        obs_view = getattr(ctx.rollout, "obs_view", None)
        return cls(cfg, pairs=_extractor(cfg, ctx.env, obs_view), device=ctx.device)

    # ------------------------------------------------------------------ reward
    @torch.no_grad()
    def style_reward(self, prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
        """Style reward ``[N]`` of policy pairs (higher when the pair looks like the expert's); 0 for a pair with a
        NaN or inf feature (the normalizer leaves such rows out and counts them)."""
        d = self.discriminator(self.discriminator.normalize(prev, cur))
        if self.loss_type == "bce":
            reward = -torch.log(torch.clamp(1.0 - torch.sigmoid(d), min=1e-4))
        elif self.loss_type == "lsgan":
            reward = torch.clamp(1.0 - 0.25 * (d - 1.0).square(), min=0.0)
        else:
            reward = d
        finite = torch.isfinite(prev).all(-1) & torch.isfinite(cur).all(-1)
        return torch.where(finite, self.style_reward_scale * reward.reshape(finite.shape), 0.0)

    def mix(self, task_reward: torch.Tensor, style_reward: torch.Tensor) -> torch.Tensor:
        """``task_weight * r_task + style_weight * r_style``."""
        return self.task_weight * task_reward + self.style_weight * style_reward

    # ------------------------------------------------------------------ training
    def losses(
        self,
        policy_prev: torch.Tensor,
        policy_cur: torch.Tensor,
        policy_valid: torch.Tensor | None,
        expert_prev: torch.Tensor,
        expert_cur: torch.Tensor,
        expert_valid: torch.Tensor | None,
    ) -> dict[str, torch.Tensor]:
        """Discriminator loss terms and accuracies (tensors) for one batch of policy and expert pairs.

        Few operations (a GPU runs this step launch-bound): one normalization and one discriminator pass over both
        sets with the R1 input gradient of the expert rows (``Discriminator.logits_and_r1``), per-row terms, and the
        masked mean of each set as a product with one weight matrix.
        """
        disc, n, m = self.discriminator, policy_prev.shape[0], expert_prev.shape[0]
        pairs = disc.normalize(torch.cat((policy_prev, expert_prev)), torch.cat((policy_cur, expert_cur)))
        logits, r1 = disc.logits_and_r1(pairs, n)
        sign, weights = self._row_weights(n, m, policy_valid, expert_valid, logits)
        if self.loss_type == "bce":  # targets s (policy) and 1 - s (expert)
            target = 0.5 + (0.5 - self.label_smoothing) * sign
            rows = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        elif self.loss_type == "lsgan":  # targets -1 (policy) and +1 (expert)
            rows = (logits - sign).square()
        else:  # wgan: mean(D(policy)) - mean(D(expert))
            rows = -sign * logits
        means = torch.stack((rows, (sign * logits > 0).to(rows.dtype))) @ weights  # [term, set]
        loss = means[0].sum() if self.loss_type == "wgan" else 0.5 * means[0].sum()
        penalty = r1 @ weights[n:, 1]
        return {
            "amp_loss": loss,
            "amp_grad_penalty": penalty,
            "amp_total": torch.add(loss, penalty, alpha=self.gradient_penalty_coef),
            "amp_policy_accuracy": means[1, 0].detach(),
            "amp_expert_accuracy": means[1, 1].detach(),
        }

    def _row_weights(
        self, n: int, m: int, policy_valid: torch.Tensor | None, expert_valid: torch.Tensor | None, like: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For ``n`` policy rows then ``m`` expert rows: their signs (-1, +1) and the weights ``[n + m, 2]`` whose
        columns take the mean over the valid rows of each set (all its rows without a mask)."""
        key = (n, m, like.dtype, like.device)
        if self._sets is None or self._sets[0] != key:  # kept while the shapes stay the same
            sets = torch.zeros(n + m, 2, dtype=like.dtype, device=like.device)
            sets[:n, 0], sets[n:, 1] = 1.0, 1.0
            self._sets = (key, sets[:, 1] - sets[:, 0], sets)
        _, sign, sets = self._sets
        if policy_valid is not None or expert_valid is not None:
            valid = torch.cat(
                (
                    sets.new_ones(n, dtype=torch.bool) if policy_valid is None else policy_valid,
                    sets.new_ones(m, dtype=torch.bool) if expert_valid is None else expert_valid,
                )
            )
            sets = sets * valid.unsqueeze(-1)
        return sign, sets / sets.sum(0).clamp(min=1.0)

    def sample_expert(self, num: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert pairs from ``expert_sampler(num)`` (for tasks without reference observations)."""
        if self.expert_sampler is None:
            raise RuntimeError("AMP has no expert pairs: give the storage reference pairs or amp_cfg['expert_sampler']")
        prev, cur = self.expert_sampler(num)
        return prev.to(self.device), cur.to(self.device)

    def with_replay(
        self, prev: torch.Tensor, cur: torch.Tensor, valid: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Append as many replayed policy pairs as the batch holds (once the buffer has any)."""
        if self.replay_size == 0 or self._replay_count == 0:
            return prev, cur, valid
        n = prev.shape[0]
        idx = torch.randint(0, self._replay_count, (n,), device=self.device)
        old = self._replay[idx]
        ones = torch.ones(n, dtype=torch.bool, device=self.device)
        valid = None if valid is None else torch.cat((valid, ones))
        return torch.cat((prev, old[:, 0])), torch.cat((cur, old[:, 1])), valid

    @torch.no_grad()
    def push_replay(self, prev: torch.Tensor, cur: torch.Tensor, valid: torch.Tensor | None) -> None:
        """Insert valid policy pairs into the circular replay buffer."""
        if self.replay_size == 0:
            return
        if valid is not None:
            prev, cur = prev[valid], cur[valid]
        pairs = torch.stack((prev, cur), dim=1)[-self.replay_size :]
        n = pairs.shape[0]
        idx = (self._replay_next + torch.arange(n, device=self.device)) % self.replay_size
        self._replay[idx] = pairs
        self._replay_next = (self._replay_next + n) % self.replay_size
        self._replay_count = min(self.replay_size, self._replay_count + n)

    def update_normalization(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Merge raw features (policy and expert states) into the feature normalizer."""
        self.discriminator.normalizer.update(features, mask)

    # ------------------------------------------------------------------ MMPPO's hooks
    def modules(self) -> list[nn.Module]:
        """The discriminator."""
        return [self.discriminator]

    def check(self, alg: Host) -> None:
        """The pairs come from the rollout's stored observations."""
        if self.pairs is None:
            raise ValueError("AMP: build it with AMP.build (or give pairs=) to use it inside MMPPO")

    def on_act(self, alg: Host, obs: TensorDictBase) -> None:
        """The features of the state the policy acted in (the first half of this step's pair)."""
        self._prev = self.pairs.features(alg.transition["obs"])

    def on_step(self, alg: Host, next_obs: TensorDictBase, rewards: torch.Tensor) -> torch.Tensor:
        """Mix the style reward of the step's pair into the task reward."""
        style = self.style_reward(self._prev, self.pairs.features(alg.stored_observations(next_obs)))
        alg.log_step("amp_style_reward", style.mean())
        alg.log_step("task_reward", rewards.mean())
        return self.mix(rewards, style)

    def before_update(self, alg: Host) -> None:
        """The discriminator's extra steps on the first rollout, before any policy update."""
        self._expert_states = []
        amp = self
        if amp.num_steps > 0 or amp.pretrain_steps == 0:
            return
        done = 0
        while done < amp.pretrain_steps:
            batches = alg.rollout.mini_batches(alg.num_mini_batches, 1, previous_keys=self.previous_keys, reuse=True)
            for batch in batches:
                terms = self._terms(alg, batch)
                amp.optimizer.zero_grad(set_to_none=True)
                terms["amp_total"].backward()
                if alg.is_multi_gpu:
                    alg.reduce_parameters(amp.discriminator.parameters())
                amp.optimizer.step()
                done += 1
                if done >= amp.pretrain_steps:
                    break

    def side_loss(self, alg: Host, batch: dict[str, Any], step: int) -> SideLoss | None:
        """The discriminator loss on every ``update_interval``-th mini-batch."""
        amp = self
        if step % amp.update_interval != 0:
            return None
        terms = self._terms(alg, batch)
        policy_pairs = terms.pop("_policy_pairs")
        self._expert_states.append(terms.pop("_expert_states"))  # type: ignore[arg-type]

        def after_step() -> None:
            amp.num_steps += 1
            amp.push_replay(*policy_pairs)

        params = list(amp.discriminator.parameters())
        return SideLoss(terms, terms["amp_total"], amp.optimizer, params, checked=True, after_step=after_step)

    def batch_pairs(self, alg: Host, batch: dict[str, Any]) -> AmpPairs:
        """The pairs of a mini-batch; the expert's are the reference groups the actor reads (``obs_groups``), if
        any and no ``expert_sampler`` replaces them."""
        groups = alg.obs_groups
        reference = (groups.actor_reference, groups.actor_reference_mask) if groups is not None else None
        if self.expert_sampler is not None:
            reference = (None, None)
        return self.pairs.pairs(batch["obs"], batch["previous"]["obs"], batch["previous_valid"], reference)

    def _terms(self, alg: Host, batch: dict[str, Any]) -> dict[str, Any]:
        """Discriminator losses on the batch's policy pairs and its expert pairs (reference pairs or the sampler)."""
        amp, masks, pairs = self, batch.get("masks"), self.batch_pairs(alg, batch)
        p_prev, p_cur = flat_rows(pairs.policy_prev, masks), flat_rows(pairs.policy_cur, masks)
        p_valid = flat_rows(pairs.valid, masks)
        e_prev = e_cur = e_valid = None
        if pairs.expert_prev is not None:
            e_prev, e_cur = flat_rows(pairs.expert_prev, masks), flat_rows(pairs.expert_cur, masks)
            e_valid = flat_rows(pairs.expert_prev_mask & pairs.expert_cur_mask, masks)
        if amp.batch_size is not None and p_prev.shape[0] > amp.batch_size:  # subsample the discriminator batch
            keep = torch.randperm(p_prev.shape[0], device=p_prev.device)[: amp.batch_size]
            p_prev, p_cur, p_valid = p_prev[keep], p_cur[keep], p_valid[keep]
            if e_prev is not None:
                e_prev, e_cur, e_valid = e_prev[keep], e_cur[keep], e_valid[keep]
        if e_prev is None:
            e_prev, e_cur = amp.sample_expert(p_prev.shape[0])
        mirror = alg.mirror("amp")
        if mirror is not None:
            p_prev, p_cur = torch.cat((p_prev, mirror(p_prev))), torch.cat((p_cur, mirror(p_cur)))
            p_valid = p_valid.repeat(2)
            e_prev, e_cur = torch.cat((e_prev, mirror(e_prev))), torch.cat((e_cur, mirror(e_cur)))
            e_valid = None if e_valid is None else e_valid.repeat(2)
        r_prev, r_cur, r_valid = amp.with_replay(p_prev, p_cur, p_valid)
        terms: dict[str, Any] = amp.losses(r_prev, r_cur, r_valid, e_prev, e_cur, e_valid)
        terms["_policy_pairs"] = (p_prev.detach(), p_cur.detach(), p_valid)
        # kept until after the update (the normalizer), beyond this batch, whose buffers the next batch reuses
        terms["_expert_states"] = (e_cur.detach().clone(), None if e_valid is None else e_valid.clone())
        return terms

    @torch.no_grad()
    def after_update(self, alg: Host) -> None:
        """Policy features of the whole rollout and the expert states the update saw, into the feature normalizer."""
        self.update_normalization(self.pairs.features(alg.rollout.get()["obs"].reshape(-1)))
        if self._expert_states:
            states = torch.cat([e[0] for e in self._expert_states])
            valid = [e[1] for e in self._expert_states]
            mask = None if any(v is None for v in valid) else torch.cat(valid)
            self.update_normalization(states, mask)
        self._expert_states = []

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """``amp_state_dict``: discriminator, optimizer, step counter."""
        state = {
            "discriminator": self.discriminator.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "num_steps": self.num_steps,
        }
        return {"amp_state_dict": state}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore ``amp_state_dict`` when the checkpoint has one."""
        if "amp_state_dict" in state:
            amp = state["amp_state_dict"]
            self.discriminator.load_state_dict(amp["discriminator"], strict=strict)
            self.optimizer.load_state_dict(amp["optimizer"])
            self.num_steps = int(amp.get("num_steps", 0))

    def runtime_state_dict(self) -> dict[str, Any]:
        """The replay buffer and its cursor."""
        return {"amp_replay": (self._replay.clone(), self._replay_count, self._replay_next)}

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the replay buffer."""
        if "amp_replay" in state:
            replay, count, nxt = state["amp_replay"]
            self._replay.copy_(replay)
            self._replay_count, self._replay_next = int(count), int(nxt)


def _extractor(cfg: AmpConfig, env: Any, obs_view: Callable[[Any], Any] | None = None) -> AmpPairExtractor:
    """The feature and pair extractor of ``cfg``'s callbacks (those with an ``env`` keyword get ``env``)."""
    spec = {
        "amp_obs_extractor": cfg.amp_obs_extractor,
        "amp_ref_obs_extractor": cfg.amp_ref_obs_extractor,
        "reference_groups": cfg.reference_groups,
        "_env": env,
    }
    return AmpPairExtractor(spec, obs_view)
