"""Export the deterministic policy (normalizers and reference encoder included) to ONNX and TorchScript."""

from mimic_rl.export.policy import ExportedPolicy, export_policy, policy_metadata

__all__ = ["ExportedPolicy", "export_policy", "policy_metadata"]
