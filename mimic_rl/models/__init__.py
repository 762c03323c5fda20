"""Neural models: reference-aware actor and critic, encoders, normalizers and the Gaussian head."""

from mimic_rl.models.actor_critic import Actor, Critic, ReferenceModel
from mimic_rl.models.distributions import GaussianHead, gaussian_entropy, gaussian_kl, gaussian_log_prob
from mimic_rl.models.mlp import MLP, activation
from mimic_rl.models.normalization import EmpiricalNormalizer
from mimic_rl.models.recurrent import HiddenState, Memory
from mimic_rl.models.reference_encoder import MLPReferenceEncoder, TransformerReferenceEncoder, build_reference_encoder

__all__ = [
    "MLP",
    "Actor",
    "Critic",
    "EmpiricalNormalizer",
    "GaussianHead",
    "HiddenState",
    "MLPReferenceEncoder",
    "Memory",
    "ReferenceModel",
    "TransformerReferenceEncoder",
    "activation",
    "build_reference_encoder",
    "gaussian_entropy",
    "gaussian_kl",
    "gaussian_log_prob",
]
