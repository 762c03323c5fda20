"""Adversarial motion priors: a discriminator over (s_prev, s) feature pairs and the style reward it gives.

Losses: ``"bce"`` (logits, optional label smoothing), ``"lsgan"`` (targets +1 expert / -1 policy) or ``"wgan"``. An R1
gradient penalty is taken on **expert** pairs only. Features are normalized by a running normalizer that is updated
once per iteration. The discriminator has its own optimizer with weight decay on the output layer. Invalid pairs
(crossing a reset, or without a reference) are masked out of every term.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn
from torch.nn import functional as F

from mimic_rl.algorithms.extensions import Extension, SideLoss, flat_rows
from mimic_rl.algorithms.optimizers import make_optimizer
from mimic_rl.models.mlp import MLP
from mimic_rl.models.normalization import EmpiricalNormalizer
from mimic_rl.storage.amp_pairs import AmpPairExtractor, AmpPairs
from mimic_rl.utils import resolve_callable

if TYPE_CHECKING:
    from mimic_rl.algorithms.ppo import MMPPO

__all__ = ["AMP", "AmpExtension", "Discriminator"]

_LOSSES = ("bce", "lsgan", "wgan")


class Discriminator(nn.Module):
    """``D(s_prev, s)``: an MLP over the concatenated, normalized feature pair, one logit per pair."""

    def __init__(self, num_features: int, hidden_dims: Sequence[int] = (256, 128), activation: str = "relu") -> None:
        super().__init__()
        self.num_features = int(num_features)
        self.normalizer = EmpiricalNormalizer(num_features)
        self.net = MLP(2 * num_features, 1, hidden_dims, activation)
        self.relu = all(isinstance(layer, nn.ReLU) for layer in list(self.net)[1::2])
        """Every activation a ReLU: the R1 input gradient is written out (``logits_and_r1``)."""

    def normalize(self, prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
        """Normalized pair input ``[..., 2F]`` (both states in one normalization)."""
        return self.normalizer(torch.stack((prev, cur), dim=-2)).flatten(-2)

    def forward(self, pair_input: torch.Tensor) -> torch.Tensor:
        """Logit ``[...]`` for a normalized pair input."""
        return self.net(pair_input).squeeze(-1)

    def logits_and_r1(self, pair_input: torch.Tensor, first: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[M]`` of normalized pair inputs ``[M, 2F]``, and for the rows from ``first`` on the squared norm of
        each logit's gradient with respect to its input (R1's per-row term), differentiable in the parameters.

        With ReLU activations the input gradient is written out (``W_1^T (m_1 * W_2^T (m_2 * w_3))`` with ``m_k`` the
        active units of the row), so one ordinary backward gives R1's parameter gradients; other activations take
        the input gradient from autograd with ``create_graph`` (a double backward).
        """
        if not self.relu:
            x = pair_input.detach().requires_grad_(True)
            logits = self(x)
            grad = torch.autograd.grad(logits[first:].sum(), x, create_graph=True)[0][first:]
            return logits, grad.square().sum(-1)
        linears = list(self.net)[::2]
        hidden, h = [], pair_input.detach()
        for layer in linears[:-1]:
            h = torch.relu(F.linear(h, layer.weight, layer.bias))
            hidden.append(h)
        last = self.net.last
        logits = F.linear(h, last.weight, last.bias).squeeze(-1)
        grad = last.weight.expand(pair_input.shape[0] - first, -1)  # d logit / d (last hidden layer)
        for layer, active in zip(reversed(linears[:-1]), reversed(hidden), strict=True):
            grad = ((active[first:] > 0) * grad) @ layer.weight
        return logits, grad.square().sum(-1)


class AMP:
    """Discriminator, its optimizer, an optional replay buffer of policy pairs, and the style reward.

    ``task_weight * r_task + style_weight * r_style`` is what the algorithm stores as the reward.
    """

    def __init__(
        self,
        num_features: int,
        hidden_dims: Sequence[int] = (256, 128),
        activation: str = "relu",
        loss_type: str = "lsgan",
        label_smoothing: float = 0.0,
        gradient_penalty_coef: float = 5.0,
        learning_rate: float = 1e-4,
        output_weight_decay: float = 1e-4,
        weight_decay: float = 0.0,
        pretrain_steps: int = 0,
        update_interval: int = 1,
        batch_size: int | None = 2048,
        replay_buffer_size: int = 0,
        task_weight: float = 1.0,
        style_weight: float = 1.0,
        style_reward_scale: float = 1.0,
        amp_obs_extractor: str | Callable | None = None,
        amp_ref_obs_extractor: str | Callable | None = None,
        expert_sampler: str | Callable | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        if loss_type not in _LOSSES:
            raise ValueError(f"amp_cfg['loss_type'] must be one of {_LOSSES}, got {loss_type!r}")
        if update_interval < 1 or pretrain_steps < 0 or replay_buffer_size < 0:
            raise ValueError("amp_cfg: need update_interval >= 1, pretrain_steps >= 0, replay_buffer_size >= 0")
        self.device = torch.device(device)
        self.discriminator = Discriminator(num_features, hidden_dims, activation).to(self.device)
        self.loss_type = loss_type
        self.label_smoothing = float(label_smoothing)
        self.gradient_penalty_coef = float(gradient_penalty_coef)
        self.pretrain_steps = int(pretrain_steps)
        self.update_interval = int(update_interval)
        self.batch_size = None if batch_size is None else int(batch_size)
        """Pairs per discriminator step: larger mini-batches are subsampled (as IsaacGymEnvs' amp_batch_size)."""
        self.task_weight = float(task_weight)
        self.style_weight = float(style_weight)
        self.style_reward_scale = float(style_reward_scale)
        self.expert_sampler = resolve_callable(expert_sampler, "amp_cfg['expert_sampler']") if expert_sampler else None
        del amp_obs_extractor, amp_ref_obs_extractor  # resolved once, by the pairs' AmpPairExtractor
        out = self.discriminator.net.last
        trunk = [
            p
            for n, p in self.discriminator.net.named_parameters()
            if not n.startswith(f"{len(self.discriminator.net) - 1}.")
        ]
        self.optimizer = make_optimizer(
            "adam",
            [
                {"params": trunk, "weight_decay": weight_decay},
                {"params": list(out.parameters()), "weight_decay": output_weight_decay},
            ],
            learning_rate,
            self.device,
        )
        self.replay_size = int(replay_buffer_size)
        self._replay = torch.zeros(self.replay_size, 2, num_features, device=self.device)
        self._replay_count = 0
        self._replay_next = 0
        self.num_steps = 0
        self._sets: tuple[tuple, torch.Tensor, torch.Tensor] | None = None

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

    def state_dict(self) -> dict[str, Any]:
        """Discriminator, optimizer and step counter."""
        return {
            "discriminator": self.discriminator.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "num_steps": self.num_steps,
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Inverse of ``state_dict``."""
        self.discriminator.load_state_dict(state["discriminator"], strict=strict)
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_steps = int(state.get("num_steps", 0))


class AmpExtension(Extension):
    """MMPPO's AMP hooks: the style reward at collection, the discriminator step per mini-batch (its own optimizer),
    the feature normalizer after the update, the replay buffer in the runtime state."""

    name = "amp"
    previous_keys = ("obs",)

    def __init__(self, amp: AMP, pairs: AmpPairExtractor) -> None:
        self.amp = amp
        self.pairs = pairs
        """The extractors (resolved once): the robot's features of stored observations, and the mini-batch pairs."""
        self._prev: torch.Tensor | None = None
        self._expert_states: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    def modules(self) -> list[nn.Module]:
        """The discriminator."""
        return [self.amp.discriminator]

    def on_act(self, alg: MMPPO, obs: TensorDictBase) -> None:
        """The features of the state the policy acted in (the first half of this step's pair)."""
        self._prev = self.pairs.features(alg.transition["obs"])

    def on_step(self, alg: MMPPO, next_obs: TensorDictBase, rewards: torch.Tensor) -> torch.Tensor:
        """Mix the style reward of the step's pair into the task reward."""
        style = self.amp.style_reward(self._prev, self.pairs.features(alg.stored_observations(next_obs)))
        alg.log_step("amp_style_reward", style.mean())
        alg.log_step("task_reward", rewards.mean())
        return self.amp.mix(rewards, style)

    def before_update(self, alg: MMPPO) -> None:
        """The discriminator's extra steps on the first rollout, before any policy update."""
        self._expert_states = []
        amp = self.amp
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

    def side_loss(self, alg: MMPPO, batch: dict[str, Any], step: int) -> SideLoss | None:
        """The discriminator loss on every ``update_interval``-th mini-batch."""
        amp = self.amp
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

    def batch_pairs(self, alg: MMPPO, batch: dict[str, Any]) -> AmpPairs:
        """The pairs of a mini-batch; the expert's are the reference groups the actor reads (``obs_groups``), if
        any."""
        groups = alg.obs_groups
        reference = (groups.actor_reference, groups.actor_reference_mask) if groups is not None else None
        return self.pairs.pairs(batch["obs"], batch["previous"]["obs"], batch["previous_valid"], reference)

    def _terms(self, alg: MMPPO, batch: dict[str, Any]) -> dict[str, Any]:
        """Discriminator losses on the batch's policy pairs and its expert pairs (reference pairs or the sampler)."""
        amp, masks, pairs = self.amp, batch.get("masks"), self.batch_pairs(alg, batch)
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
        mirror = alg.symmetry.mirror_amp if alg.symmetry is not None else None
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
    def after_update(self, alg: MMPPO) -> None:
        """Policy features of the whole rollout and the expert states the update saw, into the feature normalizer."""
        self.amp.update_normalization(self.pairs.features(alg.rollout.get()["obs"].reshape(-1)))
        if self._expert_states:
            states = torch.cat([e[0] for e in self._expert_states])
            valid = [e[1] for e in self._expert_states]
            mask = None if any(v is None for v in valid) else torch.cat(valid)
            self.amp.update_normalization(states, mask)
        self._expert_states = []

    def state_dict(self) -> dict[str, Any]:
        """``amp_state_dict``: discriminator, optimizer, step counter."""
        return {"amp_state_dict": self.amp.state_dict()}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore ``amp_state_dict`` when the checkpoint has one."""
        if "amp_state_dict" in state:
            self.amp.load_state_dict(state["amp_state_dict"], strict=strict)

    def runtime_state_dict(self) -> dict[str, Any]:
        """The replay buffer and its cursor."""
        amp = self.amp
        return {"amp_replay": (amp._replay.clone(), amp._replay_count, amp._replay_next)}

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the replay buffer."""
        if "amp_replay" in state:
            replay, count, nxt = state["amp_replay"]
            self.amp._replay.copy_(replay)
            self.amp._replay_count, self.amp._replay_next = int(count), int(nxt)
