"""Mirror symmetry: data augmentation and an equivariance loss ``pi(M s) = M pi(s)``.

Mirror functions map a tensor to its mirrored counterpart (joint permutation plus sign flips for a humanoid). They
are given per stream: observations, references, critic observations and references, actions, and AMP features. A
stream without its own function uses the actor's (``mirror_obs`` for the critic, ``mirror_reference`` for the critic
reference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from mimic_rl.algorithms.extensions import Extension, PolicyOutput
from mimic_rl.utils import resolve_callable

if TYPE_CHECKING:
    from mimic_rl.algorithms.ppo import MMPPO

__all__ = ["Symmetry", "SymmetryExtension"]

MirrorFn = Callable[[torch.Tensor], torch.Tensor]


class Symmetry:
    """Mirrored copies of a batch, and the mirror loss on the actor's mean."""

    def __init__(
        self,
        mirror_obs: str | MirrorFn,
        mirror_actions: str | MirrorFn,
        mirror_reference: str | MirrorFn | None = None,
        mirror_critic_obs: str | MirrorFn | None = None,
        mirror_critic_reference: str | MirrorFn | None = None,
        mirror_amp: str | MirrorFn | None = None,
        use_data_augmentation: bool = False,
        use_mirror_loss: bool = False,
        mirror_loss_coeff: float = 0.0,
    ) -> None:
        def resolve(spec: Any, name: str) -> MirrorFn | None:
            return None if spec is None else resolve_callable(spec, f"symmetry_cfg[{name!r}]")

        self.mirror_obs = resolve(mirror_obs, "mirror_obs")
        self.mirror_actions = resolve(mirror_actions, "mirror_actions")
        self.mirror_reference = resolve(mirror_reference, "mirror_reference")
        self.mirror_critic_obs = resolve(mirror_critic_obs, "mirror_critic_obs") or self.mirror_obs
        self.mirror_critic_reference = (
            resolve(mirror_critic_reference, "mirror_critic_reference") or self.mirror_reference
        )
        self.mirror_amp = resolve(mirror_amp, "mirror_amp")
        self.use_data_augmentation = bool(use_data_augmentation)
        self.use_mirror_loss = bool(use_mirror_loss)
        self.mirror_loss_coeff = float(mirror_loss_coeff)

    @staticmethod
    def _double(x: Any, fn: MirrorFn | None, name: str) -> Any:
        if x is None:
            return None
        if fn is None:
            raise ValueError(f"symmetry: {name} needs a mirror function for data augmentation")
        return torch.cat((x, fn(x)), dim=0)

    def augment_reference(self, ref: tuple | None, fn: MirrorFn | None, name: str) -> tuple | None:
        """``(ref, mask)`` doubled: mirrored reference, same mask."""
        if ref is None:
            return None
        return self._double(ref[0], fn, name), torch.cat((ref[1], ref[1]), dim=0)

    def augment(self, streams: dict[str, Any]) -> dict[str, Any]:
        """Double every stream of a flat mini-batch: originals first, then mirrored copies.

        Per-sample scalars (advantages, returns, values, old log-probs) are repeated; the old action distribution is
        mirrored with the actions' mirror (the std through its absolute value).
        """
        out = dict(streams)
        out["obs"] = self._double(streams["obs"], self.mirror_obs, "obs")
        out["critic_obs"] = self._double(streams["critic_obs"], self.mirror_critic_obs, "critic_obs")
        out["ref"] = self.augment_reference(streams["ref"], self.mirror_reference, "reference")
        out["critic_ref"] = self.augment_reference(
            streams["critic_ref"], self.mirror_critic_reference, "critic_reference"
        )
        out["actions"] = self._double(streams["actions"], self.mirror_actions, "actions")
        out["action_mean"] = self._double(streams["action_mean"], self.mirror_actions, "actions")
        out["action_std"] = torch.cat((streams["action_std"], self.mirror_actions(streams["action_std"]).abs()))
        if streams.get("dagger_actions") is not None:
            out["dagger_actions"] = self._double(streams["dagger_actions"], self.mirror_actions, "actions")
        for key in ("advantages", "returns", "values", "actions_log_prob"):
            out[key] = torch.cat((streams[key], streams[key]), dim=0)
        return out

    def mirror_loss(
        self,
        actor: nn.Module,
        obs: torch.Tensor,
        ref: torch.Tensor | None,
        ref_mask: torch.Tensor | None,
        mean: torch.Tensor,
        mirrored_mean: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``mean || pi(M s) - M pi(s) ||^2`` with ``M pi(s)`` as a fixed target; zero for an equivariant policy.

        ``mean`` is ``pi(s)`` on the original samples; ``mirrored_mean`` (``pi(M s)``) is computed if not given.
        """
        if mirrored_mean is None:
            m_obs = self.mirror_obs(obs)
            m_ref = self.mirror_reference(ref) if ref is not None and self.mirror_reference is not None else ref
            mirrored_mean, _ = actor.distribution(m_obs, m_ref, ref_mask)
        target = self.mirror_actions(mean).detach()
        return (mirrored_mean - target).square().mean()


class SymmetryExtension(Extension):
    """MMPPO's symmetry hooks: mirrored copies of each mini-batch, and the mirror loss on the actor's mean."""

    name = "symmetry"

    def __init__(self, symmetry: Symmetry) -> None:
        self.symmetry = symmetry

    def check(self, alg: MMPPO) -> None:
        """Feed-forward models only."""
        if alg.actor.is_recurrent or alg.critic.is_recurrent:
            raise ValueError("symmetry augmentation and the mirror loss are not supported with recurrent models")

    def transform_batch(self, alg: MMPPO, streams: dict[str, Any]) -> dict[str, Any]:
        """Originals then mirrored copies, with ``use_data_augmentation``."""
        return self.symmetry.augment(streams) if self.symmetry.use_data_augmentation else streams

    def policy_terms(self, alg: MMPPO, streams: dict[str, Any], out: PolicyOutput) -> dict[str, torch.Tensor]:
        """``mirror``: how far the actor is from equivariant on the stored samples (reported even when unweighted)."""
        sym = self.symmetry
        if not (sym.use_mirror_loss or sym.use_data_augmentation):
            return {}
        n = out.n
        mirrored = out.mean[n:] if sym.use_data_augmentation else None
        ref, ref_mask = streams["ref"] if streams["ref"] is not None else (None, None)
        ref_n = None if ref is None else ref[:n]
        mask_n = None if ref_mask is None else ref_mask[:n]
        return {"mirror": sym.mirror_loss(alg.actor, streams["obs"][:n], ref_n, mask_n, out.mean[:n], mirrored)}

    def policy_loss(self, alg: MMPPO, terms: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The mirror term times ``mirror_loss_coeff``, with ``use_mirror_loss``."""
        if "mirror" in terms and self.symmetry.use_mirror_loss:
            return self.symmetry.mirror_loss_coeff * terms["mirror"]
        return None
