"""Learning algorithms: MMPPO (with AMP, RND, DAgger guidance, symmetry) and their shared helpers."""

from mimic_rl.algorithms.amp import AMP, Discriminator
from mimic_rl.algorithms.dagger import DaggerGuidance
from mimic_rl.algorithms.distillation import Distillation
from mimic_rl.algorithms.ppo import MMPPO
from mimic_rl.algorithms.rnd import RandomNetworkDistillation
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.algorithms.symmetry import Symmetry

__all__ = [
    "AMP",
    "MMPPO",
    "DaggerGuidance",
    "Discriminator",
    "Distillation",
    "RandomNetworkDistillation",
    "Schedule",
    "Symmetry",
]
