"""``--device cuda`` end to end on the embedded backend: the physics stays on the CPU (``mujoco.rollout``), the
motion library, the tracking MDP, the policy, the storage and the update run on the GPU.

Skipped without CUDA (run on a lent GPU machine; the results are in docs/benchmarks.md when measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _env(device: str, num_envs: int = 16, compile: bool = False):
    from mimic_rl.config import load_config
    from mimic_rl.envs.mujoco import DomainRandomization, MujocoTrackingEnv

    cfg = load_config("tracking_ppo").env
    cfg.num_envs, cfg.device, cfg.compile, cfg.seed = num_envs, device, compile, 3
    cfg.randomization = DomainRandomization(enabled=False)  # pushes draw from the env's generator
    return MujocoTrackingEnv(cfg)


def test_the_mdp_on_cuda_equals_the_mdp_on_the_cpu_from_the_same_state():
    """The GPU env given the CPU env's physics and bookkeeping: the same observations, rewards and episode ends for
    the same actions (their random streams differ: a CUDA generator is not the CPU's)."""
    from mimic_rl.envs.mujoco.env_state import ENV_TENSORS as _ENV_TENSORS

    cpu, gpu = _env("cpu"), _env("cuda")
    gpu.physics.state[:] = cpu.physics.state
    gpu.physics.sensordata[:] = cpu.physics.sensordata
    gpu._sync_sensors()
    for name in _ENV_TENSORS:
        getattr(gpu, name).copy_(getattr(cpu, name))
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        actions = 0.1 * torch.randn(16, cpu.num_actions, generator=g)
        obs_c, rew_c, done_c, _ = cpu.step(actions)
        obs_g, rew_g, done_g, ext_g = gpu.step(actions.cuda())
        assert obs_g.device.type == "cuda" and rew_g.device.type == "cuda" and ext_g["time_outs"].device.type == "cuda"
        assert torch.equal(done_c, done_g.cpu())
        if done_c.any():  # the envs restart from different random draws
            break
        torch.testing.assert_close(rew_g.cpu(), rew_c, atol=1e-4, rtol=1e-4)
        for key in obs_c.keys():
            torch.testing.assert_close(obs_g[key].cpu(), obs_c[key], atol=1e-3, rtol=1e-3, msg=key)
    cpu.close()
    gpu.close()


def test_resets_on_cuda_observe_the_restarted_envs():
    """Robots that fall restart; their observations are those of their new state (observed on the device)."""
    env = _env("cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    resets = 0
    for _ in range(60):
        obs, _, dones, _ = env.step(2.0 * torch.randn(16, env.num_actions, generator=g, device="cuda"))
        assert obs.device.type == "cuda" and all(bool(torch.isfinite(v).all()) for v in obs.values())
        if dones.any():
            resets += int(dones.sum())
            fresh = env._observe(env._sensors, env.clip_ids, env.obs_time, env.last_actions)
            for key in ("policy", "reference", "critic"):
                torch.testing.assert_close(obs[key][dones], fresh[key][dones], msg=key)
            assert (env.episode_length_buf[dones] == 0).all()
    assert resets > 0
    env.close()


def test_the_compiled_env_on_cuda_equals_the_eager_one():
    eager, compiled = _env("cuda"), _env("cuda", compile=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(25):
        actions = 2.0 * torch.randn(16, eager.num_actions, generator=g, device="cuda")
        obs_e, rew_e, done_e, _ = eager.step(actions)
        obs_c, rew_c, done_c, _ = compiled.step(actions)
        assert torch.equal(done_e, done_c)
        torch.testing.assert_close(rew_c, rew_e, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(obs_c["reference"], obs_e["reference"], atol=1e-3, rtol=1e-3)
    eager.close()
    compiled.close()


def _cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    cmd = [sys.executable, "-m", "mimic_rl.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_train_eval_play_export_and_distill_on_cuda(tmp_path: Path):
    run = tmp_path / "run"
    small = ["--num-envs", "32", "--logger", "none", "--eval-envs", "4"]
    out = _cli("train", "--device", "cuda", "--iterations", "3", "--log-dir", str(run), *small)
    assert out.returncode == 0, out.stderr[-2000:]
    evaluation = json.loads((run / "eval.json").read_text())
    assert 0.0 <= evaluation["summary"]["success_rate"] <= 1.0 and evaluation["summary"]["global_mpjpe_mm"] > 0
    state = torch.load(run / "model_3.pt", map_location="cpu", weights_only=True)
    assert state["config"]["runner"]["device"] == "cuda"
    # resuming on the GPU restores the random streams saved there (numpy's state came back as a CUDA tensor once)
    out = _cli("train", "--device", "cuda", "--iterations", "1", "--log-dir", str(run), "--resume", "--no-eval", *small)
    assert out.returncode == 0 and (run / "model_4.pt").exists(), out.stderr[-2000:]
    # the same checkpoint evaluated on the GPU and on the CPU gives the same numbers: the physics is the CPU's in both,
    # and so is the env's random generator (a CUDA one gave other initial states: 93.5 against 80.0 mm on an H100)
    for device in ("cuda", "cpu"):
        out = _cli("eval", "--checkpoint", str(run / "model_3.pt"), "--output", str(tmp_path / f"{device}.json"),
                   "--num-envs", "4", "--device", device)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
    on_gpu, on_cpu = (json.loads((tmp_path / f"{d}.json").read_text())["summary"] for d in ("cuda", "cpu"))
    assert on_gpu["success_rate"] == on_cpu["success_rate"]
    assert on_gpu["global_mpjpe_mm"] == pytest.approx(on_cpu["global_mpjpe_mm"], rel=1e-2)
    out = _cli("play", "--checkpoint", str(run / "model_3.pt"), "--device", "cuda", "--steps", "60")
    assert out.returncode == 0 and "global MPJPE" in out.stdout, out.stderr[-2000:]
    out = _cli("export", "--checkpoint", str(run / "model_3.pt"), "--output", str(tmp_path / "export"))
    assert out.returncode == 0 and (tmp_path / "export" / "policy.onnx").exists(), out.stderr[-2000:]
    out = _cli("distill", "--teacher", str(run / "model_3.pt"), "--device", "cuda", "--iterations", "2",
               "--log-dir", str(tmp_path / "student"), *small)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "student" / "export" / "policy.onnx").exists()
    assert (tmp_path / "student" / "eval.json").exists() and (tmp_path / "student" / "eval_teacher.json").exists()


def test_amp_losses_on_cuda_equal_the_cpu_and_train_in_mixed_precision():
    """The discriminator step (written-out R1, weight-matrix means) on CUDA: the CPU's losses and gradients, and a
    finite step under bf16 autocast (``use_mixed_precision``)."""
    from mimic_rl.algorithms.amp import AMP

    torch.manual_seed(0)
    cpu = AMP(num_features=7, hidden_dims=(32, 16), loss_type="lsgan")
    gpu = AMP(num_features=7, hidden_dims=(32, 16), loss_type="lsgan", device="cuda")
    gpu.discriminator.load_state_dict(cpu.discriminator.state_dict())
    batch = [torch.randn(40, 7) for _ in range(4)]
    p_valid, e_valid = torch.rand(40) > 0.2, torch.rand(40) > 0.2
    ours = gpu.losses(*[b.cuda() for b in batch[:2]], p_valid.cuda(), *[b.cuda() for b in batch[2:]], e_valid.cuda())
    ref = cpu.losses(*batch[:2], p_valid, *batch[2:], e_valid)
    for key in ref:
        torch.testing.assert_close(ours[key].cpu(), ref[key], rtol=1e-4, atol=1e-5, msg=key)
    ours["amp_total"].backward()
    ref["amp_total"].backward()
    for a, b in zip(gpu.discriminator.parameters(), cpu.discriminator.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-3, atol=1e-5)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        mixed = gpu.losses(
            *[b.cuda() for b in batch[:2]], p_valid.cuda(), *[b.cuda() for b in batch[2:]], e_valid.cuda()
        )
    mixed["amp_total"].backward()
    assert torch.isfinite(mixed["amp_total"]) and abs(float(mixed["amp_total"]) - float(ref["amp_total"])) < 0.05
