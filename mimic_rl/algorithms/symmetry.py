"""Mirror symmetry: data augmentation and an equivariance loss ``pi(M s) = M pi(s)``.

Mirror functions map a tensor to its mirrored counterpart (joint permutation plus sign flips for a humanoid). They
are given per stream: observations, references, critic observations and references, actions, and AMP features. A
stream without its own function uses the actor's (``mirror_obs`` for the critic, ``mirror_reference`` for the critic
reference).

One extension, one file: ``SymmetryConfig`` (the ``algorithm.symmetry_cfg`` section), how it is built, its hooks
(mirrored copies of each mini-batch, the mirror loss on the actor's mean) and the mirror functions it gives other
extensions (AMP's features: ``mirror("amp")``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from mimic_rl.algorithms.extensions import BuildContext, Extension, Host, PolicyOutput, register_extension
from mimic_rl.utils import resolve_callable

__all__ = ["Symmetry", "SymmetryConfig"]

MirrorFn = Callable[[torch.Tensor], torch.Tensor]
MirrorSpec = str | Callable[..., Any] | None


@dataclass
class SymmetryConfig:
    """``algorithm.symmetry_cfg``: the mirror functions (``"module:function"`` or callables) and how they are used."""

    mirror_obs: MirrorSpec = None
    mirror_actions: MirrorSpec = None
    mirror_reference: MirrorSpec = None
    mirror_critic_obs: MirrorSpec = None
    mirror_critic_reference: MirrorSpec = None
    mirror_amp: MirrorSpec = None
    use_data_augmentation: bool = False
    use_mirror_loss: bool = False
    mirror_loss_coeff: float = 0.0


@register_extension
class Symmetry(Extension):
    """Mirrored copies of a batch, and the mirror loss on the actor's mean."""

    name = "symmetry"
    config_key = "symmetry_cfg"
    Config = SymmetryConfig
    build_rank = 15
    hook_rank = 20

    def __init__(self, cfg: SymmetryConfig | None = None, **fields: Any) -> None:
        """``cfg`` (or its fields as keywords, e.g. ``Symmetry(mirror_obs=f, mirror_actions=g)``)."""
        cfg = self.config_of(cfg, fields)

        def resolve(spec: Any, name: str) -> MirrorFn | None:
            return None if spec is None else resolve_callable(spec, f"symmetry_cfg[{name!r}]")

        if cfg.mirror_obs is None or cfg.mirror_actions is None:
            raise ValueError("symmetry_cfg needs 'mirror_obs' and 'mirror_actions'")
        self.cfg = cfg
        self.mirror_obs = resolve(cfg.mirror_obs, "mirror_obs")
        self.mirror_actions = resolve(cfg.mirror_actions, "mirror_actions")
        self.mirror_reference = resolve(cfg.mirror_reference, "mirror_reference")
        self.mirror_critic_obs = resolve(cfg.mirror_critic_obs, "mirror_critic_obs") or self.mirror_obs
        self.mirror_critic_reference = (
            resolve(cfg.mirror_critic_reference, "mirror_critic_reference") or self.mirror_reference
        )
        self.mirror_amp = resolve(cfg.mirror_amp, "mirror_amp")
        self.use_data_augmentation = bool(cfg.use_data_augmentation)
        self.use_mirror_loss = bool(cfg.use_mirror_loss)
        self.mirror_loss_coeff = float(cfg.mirror_loss_coeff)

    @classmethod
    def build(cls, cfg: SymmetryConfig, ctx: BuildContext) -> Symmetry:
        """The mirror functions, resolved once."""
        return cls(cfg)

    @staticmethod
    def _double(x: Any, fn: MirrorFn | None, name: str) -> Any:
        if x is None:
            return None
        if fn is None:
            raise ValueError(f"symmetry: {name} needs a mirror function for data augmentation")
        return torch.cat((x, fn(x)), dim=0)

    def augment_reference(self, reference: tuple | None, fn: MirrorFn | None, name: str) -> tuple | None:
        """``(reference, mask)`` doubled: mirrored reference, same mask."""
        if reference is None:
            return None
        return self._double(reference[0], fn, name), torch.cat((reference[1], reference[1]), dim=0)

    def augment(self, streams: dict[str, Any]) -> dict[str, Any]:
        """Double every stream of a flat mini-batch: originals first, then mirrored copies.

        Per-sample scalars (advantages, returns, values, old log-probs) are repeated; the old action distribution is
        mirrored with the actions' mirror (the std through its absolute value).
        """
        out = dict(streams)
        out["obs"] = self._double(streams["obs"], self.mirror_obs, "obs")
        out["critic_obs"] = self._double(streams["critic_obs"], self.mirror_critic_obs, "critic_obs")
        out["reference"] = self.augment_reference(streams["reference"], self.mirror_reference, "reference")
        out["critic_reference"] = self.augment_reference(
            streams["critic_reference"], self.mirror_critic_reference, "critic_reference"
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
        reference: torch.Tensor | None,
        reference_mask: torch.Tensor | None,
        mean: torch.Tensor,
        mirrored_mean: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``mean || pi(M s) - M pi(s) ||^2`` with ``M pi(s)`` as a fixed target; zero for an equivariant policy.

        ``mean`` is ``pi(s)`` on the original samples; ``mirrored_mean`` (``pi(M s)``) is computed if not given.
        """
        if mirrored_mean is None:
            m_obs = self.mirror_obs(obs)
            m_ref = reference
            if reference is not None and self.mirror_reference is not None:
                m_ref = self.mirror_reference(reference)
            mirrored_mean, _ = actor.distribution(m_obs, m_ref, reference_mask)
        target = self.mirror_actions(mean).detach()
        return (mirrored_mean - target).square().mean()

    # ------------------------------------------------------------------ MMPPO's hooks
    def check(self, alg: Host) -> None:
        """Feed-forward models only."""
        if alg.actor.is_recurrent or alg.critic.is_recurrent:
            raise ValueError("symmetry augmentation and the mirror loss are not supported with recurrent models")

    def transform_batch(self, alg: Host, streams: dict[str, Any]) -> dict[str, Any]:
        """Originals then mirrored copies, with ``use_data_augmentation``."""
        return self.augment(streams) if self.use_data_augmentation else streams

    def policy_terms(self, alg: Host, streams: dict[str, Any], out: PolicyOutput) -> dict[str, torch.Tensor]:
        """``mirror``: how far the actor is from equivariant on the stored samples (reported even when unweighted)."""
        if not (self.use_mirror_loss or self.use_data_augmentation):
            return {}
        n = out.n
        mirrored = out.mean[n:] if self.use_data_augmentation else None
        reference, mask = streams["reference"] if streams["reference"] is not None else (None, None)
        reference_n = None if reference is None else reference[:n]
        mask_n = None if mask is None else mask[:n]
        return {"mirror": self.mirror_loss(alg.actor, streams["obs"][:n], reference_n, mask_n, out.mean[:n], mirrored)}

    def policy_loss(self, alg: Host, terms: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The mirror term times ``mirror_loss_coeff``, with ``use_mirror_loss``."""
        if "mirror" in terms and self.use_mirror_loss:
            return self.mirror_loss_coeff * terms["mirror"]
        return None

    def mirror(self, stream: str) -> MirrorFn | None:
        """The mirror function of ``stream`` (``obs``, ``actions``, ``reference``, ``critic_obs``,
        ``critic_reference``, ``amp``), for other extensions (AMP's mirrored pairs)."""
        return getattr(self, f"mirror_{stream}", None)
