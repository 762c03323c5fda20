"""Student-teacher distillation with DAgger-style rollouts.

A frozen teacher (this package's actor, or an rsl_rl ``actor_state_dict``) labels every visited state; the student,
which only sees deployable observations (the ``policy`` group and, optionally, the reference command), is trained to
reproduce the teacher's actions. During collection each env executes the teacher's action with probability ``beta``
(``teacher_action_prob``, a schedule over updates that decays to 0) and the student's otherwise, so the student
learns on the states its own policy visits.

The update walks the rollout in chunks of ``gradient_length`` steps, as rsl_rl does: the loss of a chunk is the sum
of the per-step behaviour losses, and one optimizer step follows each chunk. A feed-forward student evaluates a whole
chunk in one batch; a recurrent student steps through it from the hidden state it had when the rollout began
(truncated backpropagation through time: the state is detached between chunks and zeroed where an episode ended).
Unlike rsl_rl, a last partial chunk is also used.

The rollout (a ``PolicyRollout``) keeps the groups the student reads under the env's names (``obs``), the executed
``actions`` and the teacher's ``privileged_actions``; ``obs_groups`` picks the student's inputs from a chunk of it as
from the env's TensorDict.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.distributed import MultiGPUConfig, all_reduce_gradients, broadcast_modules, placement
from mimic_rl.algorithms.optimizers import OPTIMIZERS, make_optimizer
from mimic_rl.algorithms.registry import builder_for, register_algorithm
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.algorithms.step_means import StepMeans
from mimic_rl.errors import TrainingDiverged
from mimic_rl.models.actor_critic import Actor
from mimic_rl.models.normalization import nonfinite_rows
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.models.recurrent import HiddenState, zero_done
from mimic_rl.storage import PolicyRollout, RolloutStorageMM, rollout_of

__all__ = ["PRIVILEGED_GROUPS", "Distillation"]

_LOSSES = {"mse": nn.functional.mse_loss, "huber": nn.functional.huber_loss}
PRIVILEGED_GROUPS = ("critic", "critic_reference", "critic_reference_mask", "teacher", "rnd_state")
"""Observation groups a deployable student must not read."""


def _check_deployable(groups: ObsGroups) -> ObsGroups:
    """``groups`` if the student's inputs are deployable, else a ``ValueError`` naming the privileged group."""
    for name in (*groups.actor, groups.actor_reference, groups.actor_reference_mask):
        if name in PRIVILEGED_GROUPS:
            raise ValueError(
                f"the student would read {name!r}, a privileged group; a deployable student reads 'policy' (or the "
                "env's actor groups) and the reference command"
            )
    return groups


def _check_settings(loss_type: str, optimizer: str, gradient_length: int, num_learning_epochs: int) -> None:
    """``ValueError`` naming an unknown loss or optimizer, or a length or epoch count below 1."""
    if loss_type not in _LOSSES:
        raise ValueError(f"loss_type must be one of {sorted(_LOSSES)}, got {loss_type!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
    if int(gradient_length) < 1 or int(num_learning_epochs) < 1:
        raise ValueError(
            f"gradient_length and num_learning_epochs must be >= 1, got {gradient_length}, {num_learning_epochs}"
        )


def _student_groups(obs_groups: ObsGroups | None, student_obs_group: str | None) -> ObsGroups | None:
    """The groups the student reads (``student_obs_group`` replacing the actor's), checked to be deployable."""
    if obs_groups is not None and student_obs_group is not None:
        obs_groups = replace(obs_groups, actor=(student_obs_group,))
    if obs_groups is not None:
        _check_deployable(obs_groups)
    elif student_obs_group in PRIVILEGED_GROUPS:
        _check_deployable(ObsGroups((student_obs_group,)))
    return obs_groups


def _detach(hidden: HiddenState, clone: bool = False) -> HiddenState:
    """``hidden`` cut from the graph; ``clone`` also makes a normal tensor of one created under inference mode."""
    if hidden is None:
        return None
    if isinstance(hidden, tuple):
        return tuple(h.detach().clone() if clone else h.detach() for h in hidden)  # type: ignore[return-value]
    return hidden.detach().clone() if clone else hidden.detach()


@register_algorithm("Distillation")
class Distillation:
    """Behaviour cloning of a frozen teacher into a deployable student (rsl_rl's ``Distillation`` constructor)."""

    teacher_loaded: bool = False
    """Whether the teacher holds trained parameters (set by ``load`` or by building it from a checkpoint)."""

    def __init__(
        self,
        student: Actor,
        teacher: nn.Module,
        storage: PolicyRollout | RolloutStorageMM,
        num_learning_epochs: int = 1,
        gradient_length: int = 15,
        learning_rate: float = 1e-3,
        max_grad_norm: float | None = None,
        loss_type: str = "mse",
        optimizer: str = "adam",
        device: str | torch.device = "cpu",
        multi_gpu_cfg: dict[str, int] | MultiGPUConfig | None = None,
        teacher_action_prob: float | dict[str, Any] | Schedule = 0.0,
        stochastic_student: bool = False,
        student_obs_group: str | None = None,
        use_mixed_precision: bool = False,
        grad_reduce_bucket_mb: float = 25.0,
        max_nonfinite_batches: int = 3,
        obs_groups: ObsGroups | None = None,
    ) -> None:
        _check_settings(loss_type, optimizer, gradient_length, num_learning_epochs)
        obs_groups = _student_groups(obs_groups, student_obs_group)
        self.device = torch.device(device)
        self.multi_gpu, self.is_multi_gpu, self.gpu_global_rank, self.gpu_world_size = placement(multi_gpu_cfg)
        self.student = student.to(self.device)
        self.teacher = teacher.to(self.device).eval().requires_grad_(False)
        self.storage = storage
        """The storage given (rsl_rl's attribute): a ``PolicyRollout``, or a seed ``RolloutStorageMM``."""
        self.rollout = rollout_of(storage, "distillation", "Distillation")
        """The ``PolicyRollout`` the student learns from (the seed storage's ``core``)."""
        self.transition: dict[str, Any] = {}
        """The step being collected, under the rollout's field names."""
        self._obs_keys = list(self.rollout.get()["obs"].keys())
        self.num_learning_epochs = int(num_learning_epochs)
        self.gradient_length = int(gradient_length)
        self.learning_rate = float(learning_rate)
        self.max_grad_norm = max_grad_norm
        self.loss_type = loss_type
        self.loss_fn = _LOSSES[loss_type]
        self.optimizer = make_optimizer(optimizer, self.student.parameters(), self.learning_rate, self.device)
        self.beta = Schedule.from_any(teacher_action_prob, "teacher_action_prob")
        self.stochastic_student = bool(stochastic_student)
        self.student_obs_group = student_obs_group
        self.obs_groups = obs_groups
        """The groups the student reads (``actor`` and its reference); resolved from the first observations when
        None, ``student_obs_group`` replacing the actor's groups."""
        self.use_mixed_precision = bool(use_mixed_precision) and self.device.type == "cuda"
        self.grad_reduce_bucket_mb = float(grad_reduce_bucket_mb)
        self.max_nonfinite_batches = int(max_nonfinite_batches)
        self.iteration = 0
        self.nonfinite_batches = 0
        self._nonfinite_streak = 0
        self._rollout_hidden: HiddenState = None
        self._logs = StepMeans()
        if self.is_multi_gpu:
            self.broadcast_parameters()

    # ------------------------------------------------------------------ collection
    def _student_inputs(self, obs: TensorDictBase) -> tuple[torch.Tensor, Any, Any]:
        """``(obs, reference, mask)`` of the student from the env's observations or stored ones (any batch shape)."""
        if self.obs_groups is None:
            groups = ObsGroups.resolve(None, obs)
            if self.student_obs_group is not None:
                groups = replace(groups, actor=(self.student_obs_group,))
            self.obs_groups = _check_deployable(groups)
        student_obs, reference, mask = self.obs_groups.actor_inputs(obs)
        if self.student.ref_shape is None:
            return student_obs, None, None
        return student_obs, reference, mask

    def act(self, obs: TensorDictBase) -> torch.Tensor:
        """The executed actions: the teacher's with probability ``beta`` per env, else the student's."""
        s_obs, reference, mask = self._student_inputs(obs)
        if self.rollout.step == 0:  # the recurrent state the update replays this rollout from
            self._rollout_hidden = _detach(self.student.get_hidden_state())
        mean = self.student(s_obs, reference, mask)
        actions = mean
        if self.stochastic_student:
            actions = mean + self.student.head.std() * torch.randn_like(mean)
        teacher_actions = self.teacher(obs).detach()
        beta = self.beta(self.iteration)
        if beta > 0.0:
            use_teacher = torch.rand(mean.shape[0], device=mean.device) < beta
            actions = torch.where(use_teacher.unsqueeze(-1), teacher_actions, actions)
            self._log("teacher_action_fraction", use_teacher.float().mean())
        self._log("action_error", (mean - teacher_actions).square().mean())
        t = self.transition
        t["obs"] = obs.select(*self._obs_keys)
        t["actions"] = actions.detach()
        t["privileged_actions"] = teacher_actions
        return t["actions"]

    def process_env_step(
        self, obs: TensorDictBase, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]
    ) -> None:
        """Store the step and reset the recurrent states of envs whose episode ended."""
        t = self.transition
        t["rewards"], t["dones"], t["time_outs"] = rewards, dones, extras.get("time_outs")
        self.rollout.add_step(t)
        self.transition = {}
        self.student.reset(dones)
        if hasattr(self.teacher, "reset"):
            self.teacher.reset(dones)

    def compute_returns(self, obs: TensorDictBase) -> None:
        """No-op: distillation has no return targets."""

    def _log(self, key: str, value: torch.Tensor) -> None:
        self._logs.add(key, value)

    def collection_logs(self) -> dict[str, float]:
        """Per-step means since the last call: the executed teacher fraction and the student's action error."""
        out = self._logs.pop("distill/")
        out["distill/beta"] = self.beta(self.iteration)
        return out

    # ------------------------------------------------------------------ update
    def _chunk_loss(self, start: int, stop: int, hidden: HiddenState) -> tuple[torch.Tensor, HiddenState]:
        """Sum over steps ``start:stop`` of the per-step behaviour loss, and the recurrent state after them."""
        chunk = self.rollout.get()[start:stop]
        obs, reference, mask = self._student_inputs(chunk["obs"])
        if reference is not None and mask is None:
            mask = torch.ones(reference.shape[:2], dtype=torch.bool, device=reference.device)
        target = chunk["privileged_actions"]
        if not self.student.is_recurrent:
            pred = self.student(obs, reference, mask)  # [L, N, A] in one batch
            per_step = self.loss_fn(pred, target, reduction="none").flatten(1).mean(-1)
            return per_step.sum(), hidden
        loss = torch.zeros((), device=self.device)
        dones = chunk["dones"]
        for i in range(stop - start):
            out, hidden = self.student.step(
                obs[i], None if reference is None else reference[i], None if reference is None else mask[i], hidden
            )
            loss = loss + self.loss_fn(out, target[i])
            hidden = zero_done(hidden, dones[i])
        return loss, hidden

    def update(self) -> dict[str, float]:
        """``num_learning_epochs`` passes over the rollout, one optimizer step per ``gradient_length`` steps."""
        steps = self.rollout.step
        total, counted = torch.zeros((), device=self.device), 0
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_mixed_precision)
        for _ in range(self.num_learning_epochs):
            hidden = _detach(self._rollout_hidden, clone=True)  # collected under inference mode
            for start in range(0, steps, self.gradient_length):
                stop = min(steps, start + self.gradient_length)
                with autocast:
                    loss, hidden = self._chunk_loss(start, stop, hidden)
                hidden = _detach(hidden)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.is_multi_gpu:
                    self.reduce_parameters()
                norm = nn.utils.clip_grad_norm_(self.student.parameters(), self.max_grad_norm or float("inf"))
                bad = torch.stack((loss.detach().float(), norm.float())).isfinite().all().logical_not().float()
                if self.is_multi_gpu:  # the same skip decision on every rank
                    torch.distributed.all_reduce(bad)
                if bool(bad > 0):
                    self._skip_nonfinite(loss)
                    continue
                self._nonfinite_streak = 0
                self.optimizer.step()
                total += loss.detach() / (stop - start)
                counted += 1
        obs, reference, mask = self._student_inputs(self.rollout.get()[:steps]["obs"].reshape(-1))
        if reference is not None and mask is None:
            mask = torch.ones(reference.shape[:1], dtype=torch.bool, device=reference.device)
        self.student.update_normalization(obs, reference, mask)
        self.student.head.check()
        self.iteration += 1
        self.rollout.clear()
        return {
            "behavior": float(total / max(1, counted)),
            "nonfinite_batches": float(self.nonfinite_batches),
            "nonfinite_obs_rows": float(nonfinite_rows(self.student)),
        }

    def _skip_nonfinite(self, loss: torch.Tensor) -> None:
        self.nonfinite_batches += 1
        self._nonfinite_streak += 1
        if self._nonfinite_streak >= self.max_nonfinite_batches:
            what = "behaviour loss" if not bool(torch.isfinite(loss)) else "gradient (the loss was finite)"
            raise TrainingDiverged(
                f"Distillation: {self._nonfinite_streak} consecutive chunks had a non-finite {what}. Check the "
                "observations and the teacher's actions for NaN/inf, or lower the learning rate"
            )

    # ------------------------------------------------------------------ modes, checkpoints, distributed
    def train_mode(self) -> None:
        """Training mode for the student; the teacher always stays in eval mode."""
        self.student.train()
        self.teacher.eval()

    def eval_mode(self) -> None:
        """Evaluation mode for student and teacher."""
        self.student.eval()
        self.teacher.eval()

    def save(self) -> dict[str, Any]:
        """Student, teacher (with what rebuilds it), optimizer and counters."""
        return {
            "student_state_dict": self.student.state_dict(),
            "student_cfg": getattr(self.student, "config", None),
            "teacher_state_dict": self.teacher.state_dict(),
            "teacher_cfg": getattr(self.teacher, "config", None),
            "optimizer_state_dict": self.optimizer.state_dict(),
            "algorithm_iteration": self.iteration,
            "nonfinite_batches": self.nonfinite_batches,
            **({} if self.obs_groups is None else {"obs_groups": self.obs_groups.to_dict()}),
        }

    def load(self, loaded_dict: dict[str, Any], load_cfg: dict[str, bool] | None = None, strict: bool = True) -> bool:
        """Load the parts named in ``load_cfg``; returns whether the iteration should be restored.

        Default: from a training checkpoint (this package's or rsl_rl's ``actor_state_dict``) the teacher only; from
        a distillation checkpoint everything. Shape mismatches raise naming the layer.
        """
        from mimic_rl.models.teacher import load_teacher_state

        is_distillation = "student_state_dict" in loaded_dict
        if load_cfg is None:
            load_cfg = (
                {"student": True, "teacher": True, "optimizer": True, "iteration": True}
                if is_distillation
                else {"teacher": True}
            )
        unknown = set(load_cfg) - {"student", "teacher", "optimizer", "iteration"}
        if unknown:
            raise ValueError(f"load_cfg: unknown key(s) {sorted(unknown)}")
        if load_cfg.get("student"):
            self.student.load_state_dict(loaded_dict["student_state_dict"], strict=strict)
        if load_cfg.get("teacher"):
            load_teacher_state(self.teacher, loaded_dict)
            self.teacher_loaded = True
        if load_cfg.get("optimizer"):
            self.optimizer.load_state_dict(loaded_dict["optimizer_state_dict"])
        if load_cfg.get("iteration"):
            self.iteration = int(loaded_dict.get("algorithm_iteration", 0))
            self.nonfinite_batches = int(loaded_dict.get("nonfinite_batches", 0))
        return bool(load_cfg.get("iteration", False))

    def runtime_state_dict(self) -> dict[str, Any]:
        """The student's collection-time recurrent state (what ``save()`` leaves out for an exact resume)."""
        return {"student_hidden": self.student.get_hidden_state(), "rollout_hidden": self._rollout_hidden}

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``runtime_state_dict()``."""
        if self.student.memory is not None:
            self.student.memory.hidden = state.get("student_hidden")
        self._rollout_hidden = state.get("rollout_hidden")

    def get_policy(self) -> Actor:
        """The student (its ``forward`` is the deployable deterministic policy)."""
        return self.student

    def broadcast_parameters(self) -> None:
        """Copy student and teacher parameters and buffers from rank 0 to every rank."""
        broadcast_modules([self.student, self.teacher])

    def reduce_parameters(self) -> None:
        """Average the student's gradients across ranks in bounded buckets."""
        all_reduce_gradients(self.student.parameters(), self.gpu_world_size, self.grad_reduce_bucket_mb)

    @staticmethod
    def construct_algorithm(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device):
        """Student, teacher, storage and Distillation from ``cfg`` (see ``mimic_rl.algorithms.distill_builder``)."""
        return builder_for("Distillation")(obs, env, cfg, device)
