"""The AMP expert of the embedded envs: the ``amp`` group of their clips' states, as the robot's is computed."""

from __future__ import annotations

import torch

from mimic_rl.tasks.tracking import StepContext, evaluate_observations

__all__ = ["AmpExpert"]


class AmpExpert:
    """Expert pairs drawn from the env's motion library (a mixin of ``MujocoTrackingEnv``: it reads ``cfg``,
    ``library``, ``step_dt``, ``device``, ``tracking_layout``, ``_ref_tracked`` and ``_observation_table``)."""

    @property
    def amp_pairs_from_env(self) -> bool:
        """AMP's expert pairs come from ``amp_expert_sampler``, not from the reference observation, whose layout is
        the ``joints`` one (``env.amp_features: body``)."""
        return self.cfg.amp_features != "joints"

    def amp_expert_sampler(self, num: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``num`` expert pairs ``(amp at t - dt, amp at t)``: the ``amp`` group of the clips' states at uniformly
        random times, one policy step apart (clips drawn in proportion to their durations)."""
        durations = self.library.clip_duration
        clips = torch.multinomial(durations / durations.sum(), num, replacement=True)
        span = (durations[clips] - self.step_dt).clamp(min=0.0)
        times = self.step_dt + span * torch.rand(num, device=self.device)
        return self.amp_clip_features(clips, times - self.step_dt), self.amp_clip_features(clips, times)

    def amp_clip_features(self, clip_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """The ``amp`` group ``[M, F]`` of the clips ``clip_ids`` at ``times`` (s), as the robot's is computed."""
        state = self.library.state(clip_ids, times, bodies=self._ref_tracked)
        table = {"amp": self._observation_table["amp"]}
        return evaluate_observations(table, StepContext(state, self.tracking_layout))["amp"]
