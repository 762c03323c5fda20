"""DistillationRunner: the OnPolicyRunner loop (collection, logging, atomic checkpoints, exact resume, torchrun)
around ``Distillation``: a frozen teacher, a deployable student and DAgger-style rollouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mimic_rl.algorithms.distillation import Distillation
from mimic_rl.config import DistillConfig, to_dict
from mimic_rl.runners.on_policy import OnPolicyRunner

__all__ = ["DistillationRunner"]


class DistillationRunner(OnPolicyRunner):
    """Trains a student from ``cfg.teacher`` on ``cfg.env``; ``learn()`` refuses to run without a loaded teacher."""

    cfg: DistillConfig
    alg: Distillation

    def __init__(self, cfg: DistillConfig, log_dir: str | Path | None = None, env: Any | None = None) -> None:
        super().__init__(cfg, log_dir, env)

    def _build_algorithm(self, obs: Any) -> Distillation:
        cfg = self.cfg
        teacher = to_dict(cfg.teacher) if cfg.teacher.checkpoint else None
        alg_cfg = {
            "algorithm": dict(cfg.algorithm),
            "student": dict(cfg.student),
            "teacher": teacher,
            "num_steps_per_env": cfg.runner.num_steps_per_env,
            "obs_groups": cfg.obs_groups,
            "multi_gpu": None if self.multi_gpu is None else vars(self.multi_gpu),
        }
        if teacher is None:
            raise ValueError(
                "teacher.checkpoint is not set: distillation needs a trained teacher (mimic-rl distill --teacher CKPT)"
            )
        return Distillation.construct_algorithm(obs, self.env, alg_cfg, self.device)

    def learn(self, num_iterations: int | None = None) -> dict[str, float]:
        """Distil for ``num_iterations`` (default: the config's ``max_iterations``) or until the time budget."""
        if not self.alg.teacher_loaded:
            raise ValueError("the teacher's parameters are not loaded; load a teacher checkpoint to distil from")
        return super().learn(num_iterations)

    def _checked_models(self) -> dict[str, Any]:
        return {"student": self.alg.student}

    def _load_cfg(self, load_optimizer: bool, resume: bool) -> dict[str, bool]:
        return {"student": True, "teacher": True, "optimizer": load_optimizer, "iteration": resume}
