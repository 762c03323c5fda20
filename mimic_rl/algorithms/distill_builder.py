"""Build Distillation, its student, its teacher and its storage from a config and an example observation TensorDict."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.builder import describe_groups, strip_class_name
from mimic_rl.algorithms.distillation import Distillation
from mimic_rl.algorithms.registry import register_builder
from mimic_rl.config import DistillConfig, register_validator
from mimic_rl.errors import CheckpointError, ConfigError
from mimic_rl.models.actor_critic import Actor, ReferenceModel
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.models.teacher import load_teacher, teacher_from_config
from mimic_rl.storage import PolicyRollout
from mimic_rl.utils import check_kwargs

__all__ = ["TEACHER_KEYS", "build_distillation", "check_distill_sections", "check_distillation_kwargs"]

TEACHER_KEYS = ("checkpoint", "obs_groups", "activation")
"""Keys of a teacher section: a checkpoint path, and for rsl_rl checkpoints the observation groups its MLP reads
(concatenated in that order) and its activation."""


def check_distillation_kwargs(algorithm: dict[str, Any], student: dict[str, Any], name: str = "{}") -> None:
    """Raise ``ValueError`` naming any key that Distillation or the student (an ``Actor``) does not accept.

    The student section also takes ``use_reference`` (bool, default True): whether the student reads the reference
    command. ``name`` formats the section name in messages (``"{}"`` or ``"cfg['{}']"``).
    """
    student = {k: v for k, v in student.items() if k != "use_reference"}
    check_kwargs(
        (Actor.__init__, ReferenceModel.__init__),
        student,
        name.format("student"),
        ("obs_dim", "num_actions", "ref_shape", "output_dim"),
    )
    check_kwargs(
        Distillation.__init__,
        algorithm,
        name.format("algorithm"),
        ("student", "teacher", "storage", "device", "obs_groups"),
    )


def _teacher(spec: Any, device: str | torch.device) -> tuple[nn.Module, bool]:
    """(teacher module, whether it holds trained parameters) from a module, a checkpoint dict/path or a section."""
    if isinstance(spec, nn.Module):
        return load_teacher(spec, device=device), True
    spec = dict(spec or {})
    if "kind" in spec:  # an architecture only (a teacher's .config); parameters come later through load()
        return teacher_from_config(spec).to(device), False
    unknown = set(spec) - set(TEACHER_KEYS)
    if unknown:
        raise ConfigError(f"cfg['teacher']: unknown key(s) {sorted(unknown)}; allowed keys are {list(TEACHER_KEYS)}")
    if not spec.get("checkpoint"):
        raise ConfigError(
            "teacher.checkpoint: expected a trained policy (this package's or rsl_rl's), found none; pass --teacher"
        )
    groups = spec.get("obs_groups") or ["policy", "reference"]
    return load_teacher(spec["checkpoint"], groups, spec.get("activation", "elu"), device), True


def build_distillation(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device):
    """Student sized from ``obs``, the teacher, a distillation ``PolicyRollout`` of the groups the student reads, and
    ``Distillation``.

    ``cfg`` keys: ``algorithm`` (Distillation arguments), ``student`` (Actor arguments and ``use_reference``),
    ``teacher`` (a module, or ``{checkpoint, obs_groups, activation}``), ``num_steps_per_env``, optional
    ``multi_gpu`` and ``obs_groups`` (the student reads ``actor`` and, with ``use_reference``, its reference; see
    ``ObsGroups``). Unknown keys are errors that name the key; the teacher is run once on ``obs`` to check that it
    fits the env.
    """
    alg_cfg, alg_cls = strip_class_name(cfg.get("algorithm"), "cfg['algorithm']", "Distillation", "algorithm")
    student_cfg, student_cls = strip_class_name(cfg.get("student"), "cfg['student']", "Actor")
    check_distillation_kwargs(alg_cfg, student_cfg, name="cfg['{}']")
    groups = ObsGroups.resolve(cfg.get("obs_groups"), obs)
    group = alg_cfg.pop("student_obs_group", None)
    if group is not None:
        if group not in obs.keys():
            raise ConfigError(
                f"algorithm.student_obs_group: expected an observation group of the env ({list(obs.keys())}), "
                f"found {group!r}"
            )
        groups = replace(groups, actor=(group,))
    use_reference = bool(student_cfg.pop("use_reference", True)) and groups.actor_reference is not None
    if not use_reference:
        groups = replace(groups, actor_reference=None, actor_reference_mask=None)
    num_actions = int(env.num_actions)
    obs_shape = (groups.shapes(obs)["actor"],)
    ref_shape = groups.shapes(obs)["actor_reference"]
    student = student_cls(obs_shape[-1], num_actions, ref_shape, **student_cfg)
    teacher, loaded = _teacher(cfg.get("teacher"), device)
    try:
        with torch.no_grad():
            labels = teacher.to(device)(obs.to(device))
    except (RuntimeError, ValueError, KeyError) as exc:  # observations of another size or another group layout
        raise CheckpointError(
            f"--teacher: expected a policy for this env's observations ({describe_groups(obs)}), found one that "
            f"cannot read them ({str(exc).splitlines()[0]}); pass a teacher trained on this robot and task"
        ) from None
    if tuple(labels.shape) != (obs.batch_size[0], num_actions):
        raise CheckpointError(
            f"--teacher: expected a policy with {num_actions} actions (this env's robot), found one with "
            f"{tuple(labels.shape)[-1]}; pass a teacher trained on this robot"
        )
    if hasattr(teacher, "reset"):
        teacher.reset()
    stored = [g for g in (*groups.actor, groups.actor_reference, groups.actor_reference_mask) if g is not None]
    storage = PolicyRollout(
        "distillation",
        int(env.num_envs),
        int(cfg.get("num_steps_per_env", 24)),
        {g: obs[g] for g in dict.fromkeys(stored)},  # the student's groups, under the env's names
        (num_actions,),
        device=device,
    )
    multi_gpu = cfg.get("multi_gpu")
    alg = alg_cls(student, teacher, storage, device=device, multi_gpu_cfg=multi_gpu, obs_groups=groups, **alg_cfg)
    alg.teacher_loaded = loaded
    return alg


def check_distill_sections(cfg: Any) -> None:
    """Raise ``ValueError`` naming any key of a ``DistillConfig``'s ``algorithm`` or ``student`` section that
    Distillation or the student rejects (registered with ``mimic_rl.config``: run by ``DistillConfig.validate``)."""
    check_distillation_kwargs(cfg.algorithm, cfg.student)


register_builder("Distillation", build_distillation)
register_validator(DistillConfig, check_distill_sections)
