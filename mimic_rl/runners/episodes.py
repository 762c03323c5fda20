"""Episode statistics of a training iteration, accumulated on the device (one host transfer per iteration).

Success has one meaning everywhere (training logs, evaluation, plots): an episode that ends without a termination,
i.e. it reached the end of its clip or the episode limit (``extras["time_outs"]``). Training episodes start anywhere
in a clip, so training success is not evaluation success (every clip played from its first frame): the evaluation
is the number to judge a tracker by. Termination causes are the fraction of ended episodes each cause ended.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

__all__ = ["EpisodeStats"]


class EpisodeStats:
    """Per-env return and length of the running episodes; per-iteration sums over the episodes that ended."""

    def __init__(self, num_envs: int, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.episode_reward = torch.zeros(num_envs, device=self.device)
        self.episode_length = torch.zeros(num_envs, device=self.device)
        self._causes: list[str] = []
        self._reset_sums()

    def _reset_sums(self) -> None:
        # ended episodes, successes, sum of returns, sum of lengths, then one count per termination cause
        self._sums = torch.zeros(4 + len(self._causes), dtype=torch.float64, device=self.device)

    def step(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        time_outs: torch.Tensor | None,
        causes: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """Count one env step (no host sync); ``causes`` are the env's termination terms (bool ``[N]`` each)."""
        dones = dones.reshape(-1).bool()
        self.episode_reward += rewards.reshape(-1).float()
        self.episode_length += 1
        if causes and list(causes) != self._causes:
            old = self._sums
            self._causes = list(causes)
            self._reset_sums()
            self._sums[:4] += old[:4]
        success = dones if time_outs is None else dones & time_outs.reshape(-1).bool()
        parts = [
            dones.sum(),
            success.sum(),
            torch.where(dones, self.episode_reward, 0.0).sum(),
            torch.where(dones, self.episode_length, 0.0).sum(),
            *[(causes[c].reshape(-1).bool() & dones).sum() for c in self._causes],
        ]
        self._sums += torch.stack([p.to(torch.float64) for p in parts])
        self.episode_reward.masked_fill_(dones, 0.0)
        self.episode_length.masked_fill_(dones, 0.0)

    def pop(self) -> dict[str, float]:
        """The means over the episodes that ended since the last call (empty when none ended), then reset."""
        sums = self._sums.tolist()
        self._reset_sums()
        ended = sums[0]
        if ended == 0:
            return {}
        out = {
            "episode/count": ended,
            "episode/success_rate": sums[1] / ended,
            "episode/reward": sums[2] / ended,
            "episode/length": sums[3] / ended,
        }
        out.update({f"episode/termination/{c}": n / ended for c, n in zip(self._causes, sums[4:])})
        return {k: v for k, v in out.items() if math.isfinite(v)}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The running episodes (for an exact resume)."""
        return {"episode_reward": self.episode_reward.clone(), "episode_length": self.episode_length.clone()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Inverse of ``state_dict``."""
        self.episode_reward.copy_(state["episode_reward"])
        self.episode_length.copy_(state["episode_length"])
