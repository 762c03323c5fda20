"""Learning algorithms: MMPPO (with AMP, RND, DAgger guidance, symmetry as extensions), Distillation, their builders
and the registries behind ``class_name`` and the extension config sections."""

from mimic_rl.algorithms.amp import AMP, AmpConfig
from mimic_rl.algorithms.builder import build_mmppo
from mimic_rl.algorithms.dagger import DaggerConfig, DaggerGuidance
from mimic_rl.algorithms.distill_builder import build_distillation
from mimic_rl.algorithms.distillation import Distillation
from mimic_rl.algorithms.extensions import (
    BuildContext,
    Extension,
    Host,
    PolicyOutput,
    SideLoss,
    extension_config_keys,
    register_extension,
)
from mimic_rl.algorithms.ppo import MMPPO
from mimic_rl.algorithms.registry import register, register_algorithm, register_builder
from mimic_rl.algorithms.rnd import RandomNetworkDistillation, RndConfig
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.algorithms.symmetry import Symmetry, SymmetryConfig
from mimic_rl.models.discriminator import Discriminator

__all__ = [
    "AMP",
    "MMPPO",
    "AmpConfig",
    "BuildContext",
    "DaggerConfig",
    "DaggerGuidance",
    "Discriminator",
    "Distillation",
    "Extension",
    "Host",
    "PolicyOutput",
    "RandomNetworkDistillation",
    "RndConfig",
    "Schedule",
    "SideLoss",
    "Symmetry",
    "SymmetryConfig",
    "build_distillation",
    "build_mmppo",
    "extension_config_keys",
    "register",
    "register_algorithm",
    "register_builder",
    "register_extension",
]
