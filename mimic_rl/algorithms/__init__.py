"""Learning algorithms: MMPPO (with AMP, RND, DAgger guidance, symmetry as extensions), Distillation, their builders
and the registry behind ``class_name``."""

from mimic_rl.algorithms.amp import AMP, AmpExtension, Discriminator
from mimic_rl.algorithms.builder import build_mmppo
from mimic_rl.algorithms.dagger import DaggerExtension, DaggerGuidance
from mimic_rl.algorithms.distill_builder import build_distillation
from mimic_rl.algorithms.distillation import Distillation
from mimic_rl.algorithms.extensions import Extension, PolicyOutput, SideLoss
from mimic_rl.algorithms.ppo import MMPPO
from mimic_rl.algorithms.registry import register, register_algorithm, register_builder
from mimic_rl.algorithms.rnd import RandomNetworkDistillation, RndExtension
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.algorithms.symmetry import Symmetry, SymmetryExtension

__all__ = [
    "AMP",
    "MMPPO",
    "AmpExtension",
    "DaggerExtension",
    "DaggerGuidance",
    "Discriminator",
    "Distillation",
    "Extension",
    "PolicyOutput",
    "RandomNetworkDistillation",
    "RndExtension",
    "Schedule",
    "SideLoss",
    "Symmetry",
    "SymmetryExtension",
    "build_distillation",
    "build_mmppo",
    "register",
    "register_algorithm",
    "register_builder",
]
