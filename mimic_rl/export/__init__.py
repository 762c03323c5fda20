"""Export the deterministic policy (normalizers and reference encoder included) to ONNX and TorchScript."""

from mimic_rl.export.policy import ExportedPolicy, check_onnx_export, export_policy, policy_metadata

__all__ = ["ExportedPolicy", "check_onnx_export", "export_policy", "policy_metadata"]
