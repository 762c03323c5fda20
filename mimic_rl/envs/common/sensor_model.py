"""Sensor noise, observation latency and action delay of the deployable observations, for any backend.

``SensorChannels`` turns each step's exact deployable groups into what a robot's sensors would report: every term's
value of ``latency_steps`` control steps before, plus uniform noise (``DeployObservations``). ``ActionDelay`` holds
the policy's actions back for a number of control steps before they become PD targets. Both keep a short history per
env; an env that restarts fills its history with its first value (no stale readings from its previous episode).
Draws come from their own generator, so switching them on leaves every other random stream of the env as it was.
"""

from __future__ import annotations

from typing import Any

import torch

from mimic_rl.tasks.tracking.deploy import DeployObservations, SensorModel, term_sizes

__all__ = ["ActionDelay", "SensorChannels", "deploy_columns"]


def deploy_columns(num_joints: int, num_actions: int) -> dict[str, list[tuple[str, slice]]]:
    """Where each sensed term sits along the last dim of each deployable group: ``{group: [(term, columns)]}``
    (``last_action`` is not sensed: the policy knows it)."""
    sizes = term_sizes(num_joints, num_actions, 0)
    policy, start = [], 0
    for name in ("joint_pos_rel", "joint_vel", "anchor_ang_vel_b", "projected_gravity"):
        policy.append((name, slice(start, start + sizes[name])))
        start += sizes[name]
    ori = slice(2 * num_joints, 2 * num_joints + 6)
    return {"deploy_policy": policy, "deploy_reference": [("deploy_reference", ori)]}


class SensorChannels:
    """The noise and latency of ``cfg`` on the deployable groups of ``num_envs`` envs (see the module docstring)."""

    def __init__(
        self, cfg: DeployObservations, num_joints: int, num_actions: int, num_envs: int, device: Any, seed: int
    ) -> None:
        models = cfg.sensors()
        self.columns: dict[str, list[tuple[slice, SensorModel]]] = {
            group: [(cols, models[term]) for term, cols in terms]
            for group, terms in deploy_columns(num_joints, num_actions).items()
        }
        self.depth = {g: 1 + max((m.latency_steps for _, m in cols), default=0) for g, cols in self.columns.items()}
        self.num_envs, self.device = num_envs, torch.device(device)
        self.generator = torch.Generator().manual_seed(seed + 7919)  # its own stream: the env's draws stay as they were
        self.history: dict[str, torch.Tensor] = {}

    def __call__(self, groups: dict[str, torch.Tensor], restarted: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The deployable groups of ``groups`` as the sensors report them (other groups untouched); ``restarted``
        (env ids, or None for all) are envs whose episode starts at this observation."""
        out = dict(groups)
        for group, cols in self.columns.items():
            exact = groups[group]
            past = self.history.get(group)
            if past is None or restarted is None:
                past = exact.unsqueeze(0).expand(self.depth[group], *exact.shape).clone()
            else:
                past = torch.cat((exact.unsqueeze(0), past[:-1]))
                if restarted.numel():
                    past[:, restarted] = exact[restarted].unsqueeze(0)
            self.history[group] = past
            seen = exact.clone()
            for columns, model in cols:
                value = past[model.latency_steps][..., columns]
                if model.noise > 0:
                    u = torch.rand(value.shape, generator=self.generator).to(self.device, value.dtype)
                    value = value + model.noise * (2.0 * u - 1.0)
                seen[..., columns] = value
            out[group] = seen
        return out

    def state_dict(self, delay: ActionDelay | None = None) -> dict[str, Any]:
        """The histories, the generator and ``delay``'s pending actions (plain tensors)."""
        state = {"history": {k: v.clone() for k, v in self.history.items()}, "generator": self.generator.get_state()}
        if delay is not None:
            state["action_delay"] = [delay.buffer.clone(), delay.fresh.clone()]
        return state

    def load_state_dict(self, state: dict[str, Any], delay: ActionDelay | None = None) -> None:
        """Restore ``state_dict()`` (and ``delay``'s pending actions)."""
        self.history = {k: v.to(self.device).clone() for k, v in state["history"].items()}
        self.generator.set_state(state["generator"].cpu())
        if delay is not None and "action_delay" in state:
            buffer, fresh = state["action_delay"]
            delay.buffer, delay.fresh = buffer.to(self.device).clone(), fresh.to(self.device).clone()


class ActionDelay:
    """Actions reach the PD targets ``steps`` control steps after the policy chose them (``steps=0``: at once)."""

    def __init__(self, steps: int, num_envs: int, num_actions: int, device: Any) -> None:
        self.steps = int(steps)
        self.buffer = torch.zeros(self.steps + 1, num_envs, num_actions, device=device)
        self.fresh = torch.ones(num_envs, dtype=torch.bool, device=device)

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        """Push this step's ``actions`` ``[N, A]``; returns the ones to apply now. An env in its first step fills its
        history with its first action."""
        if self.steps == 0:
            return actions
        self.buffer = torch.cat((actions.unsqueeze(0), self.buffer[:-1]))
        first = self.fresh.view(1, -1, 1)
        self.buffer = torch.where(first, actions.unsqueeze(0), self.buffer)
        self.fresh.zero_()
        return self.buffer[-1]

    def restart(self, env_ids: torch.Tensor | None = None) -> None:
        """The episodes of ``env_ids`` (None: all) start over: their next action fills their history."""
        if env_ids is None:
            self.fresh.fill_(True)
        else:
            self.fresh[env_ids] = True
