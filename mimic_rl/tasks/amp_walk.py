"""The style-only walking task's MDP core (``amp_walk``): walk at a commanded heading and speed, with the style left
to an AMP discriminator trained on a reference clip (Peng et al. 2021's heading task; Isaac Lab's ``humanoid_amp``).

Pure functions of tensors, no simulator:

- a command per env: a planar speed and a world heading, drawn when the episode starts (the heading relative to the
  robot's own at that moment, so that the range means the same whichever way the clip walks);
- the command as the policy sees it: ``(speed, cos, sin)`` of the commanded heading in the anchor's heading frame;
- the task reward ``exp(-|v_xy - v*|^2 / std^2)`` of the anchor's planar velocity against the commanded one;
- the fall termination: the anchor below a height.

The style reward is the AMP discriminator's (``mimic_rl.algorithms.amp``); the expert pairs come from the clip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch

from mimic_rl.utils import Range

__all__ = [
    "WalkCommandConfig",
    "command_observation",
    "command_velocity",
    "fallen",
    "heading_angle",
    "sample_commands",
    "velocity_reward",
]


@dataclass
class WalkCommandConfig:
    """The commands of ``amp_walk`` and what they reward (``env.command``)."""

    speed_range: tuple[float, float] = (1.0, 2.0)
    """Commanded planar speed, m/s, uniform (the shipped walk clip walks at ~1.5 m/s)."""
    heading_range: tuple[float, float] = (-0.785, 0.785)
    """Commanded heading relative to the robot's heading at the episode's start, rad, uniform."""
    velocity_std: Annotated[float, Range(0, low_exclusive=True)] = 0.3
    """Kernel width of the velocity reward, m/s."""
    velocity_weight: Annotated[float, Range(0)] = 1.0
    fall_height_fraction: Annotated[float, Range(0, 1)] = 0.6
    """An episode ends once the anchor is below this fraction of the clip's mean anchor height."""

    def __post_init__(self) -> None:
        for name in ("speed_range", "heading_range"):
            low, high = getattr(self, name)
            if not low <= high:
                raise ValueError(f"env.command.{name}: expected low <= high, found ({low}, {high})")
        if self.speed_range[0] < 0:
            raise ValueError(f"env.command.speed_range: expected speeds >= 0, found {self.speed_range}")


def heading_angle(quat: torch.Tensor) -> torch.Tensor:
    """The yaw ``[...]`` (rad, about world z) of orientations ``[..., 4]`` (wxyz)."""
    w, x, y, z = quat.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def sample_commands(
    cfg: WalkCommandConfig, start_heading: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(speed [M], heading [M])`` for envs whose robots face ``start_heading`` ``[M]`` (rad); drawn on the CPU from
    ``generator`` (the same stream on every device), returned on ``start_heading``'s device."""
    u = torch.rand(start_heading.shape[0], 2, generator=generator).to(start_heading.device)
    (s0, s1), (h0, h1) = cfg.speed_range, cfg.heading_range
    speed = s0 + (s1 - s0) * u[:, 0]
    heading = start_heading + h0 + (h1 - h0) * u[:, 1]
    return speed, torch.atan2(torch.sin(heading), torch.cos(heading))


def command_velocity(speed: torch.Tensor, heading: torch.Tensor) -> torch.Tensor:
    """The commanded planar velocity ``[M, 2]`` (world x, y)."""
    return torch.stack((speed * torch.cos(heading), speed * torch.sin(heading)), dim=-1)


def command_observation(anchor_quat_w: torch.Tensor, speed: torch.Tensor, heading: torch.Tensor) -> torch.Tensor:
    """``[M, 3]``: the commanded speed and the cosine and sine of the commanded heading less the anchor's."""
    relative = heading - heading_angle(anchor_quat_w)
    return torch.stack((speed, torch.cos(relative), torch.sin(relative)), dim=-1)


def velocity_reward(anchor_lin_vel_w: torch.Tensor, target_xy: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-|v_xy - v*|^2 / std^2)`` ``[M]`` of the anchor's world velocity ``[M, 3]`` against ``target_xy``."""
    error = (anchor_lin_vel_w[:, :2] - target_xy).square().sum(-1)
    return torch.exp(-error / (std * std))


def fallen(anchor_pos_w: torch.Tensor, min_height: float) -> torch.Tensor:
    """bool ``[M]``: the anchor ``[M, 3]`` is below ``min_height``."""
    return anchor_pos_w[:, 2] < min_height
