"""Offscreen rendering of an env's rollout (optionally beside its reference) to GIF or MP4 with ``mujoco.Renderer``.

Rendering needs an OpenGL backend: the one ``MUJOCO_GL`` names, else the first of EGL (GPU drivers or Mesa), OSMesa and
GLFW that works (``opengl.offscreen_renderer``). Without one, ``render_rollout`` raises ``RenderingUnavailable`` with
what to install. GIFs are written with Pillow (a
matplotlib dependency); MP4 needs ``imageio`` with ``imageio-ffmpeg``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

from mimic_rl.envs.mujoco.opengl import offscreen_renderer
from mimic_rl.errors import RenderingUnavailable

__all__ = ["RenderingUnavailable", "render_rollout"]


def _write(frames: list[np.ndarray], path: Path, fps: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        return path
    if path.suffix.lower() == ".mp4":
        try:
            import imageio.v2 as imageio
        except ImportError as exc:
            raise RenderingUnavailable(
                "writing MP4 needs imageio and imageio-ffmpeg; install them or use .gif"
            ) from exc
        imageio.mimsave(path, frames, fps=fps)
        return path
    raise ValueError(f"unsupported video format {path.suffix!r}: use .gif or .mp4")


def render_rollout(
    env: Any,
    path: str | Path,
    policy: Callable[[Any], torch.Tensor] | None = None,
    steps: int = 100,
    env_index: int = 0,
    show_reference: bool = True,
    width: int = 480,
    height: int = 360,
    on_dones: Callable[[torch.Tensor], Any] | None = None,
) -> Path:
    """Roll out ``policy`` (default: zero actions) in ``env`` and write env ``env_index``'s video to ``path``.

    With ``show_reference`` the reference motion is drawn beside the robot (a second image, side by side).
    ``on_dones`` is called with each step's dones, e.g. ``actor.reset`` so that a recurrent policy starts every new
    episode from a zero state.
    """
    model = env.model
    renderer = offscreen_renderer(model, width, height)
    data, ref_data = mujoco.MjData(model), mujoco.MjData(model)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    camera.trackbodyid = 1
    camera.distance, camera.elevation, camera.azimuth = 3.0, -15.0, 90.0
    frames: list[np.ndarray] = []
    obs = env.get_observations()
    zero = torch.zeros(env.num_envs, env.num_actions, device=env.device)
    for _ in range(steps):
        with torch.inference_mode():
            actions = policy(obs) if policy is not None else zero
        obs, _, dones, _ = env.step(actions)
        if on_dones is not None:
            on_dones(dones)
        state = env.physics.state[env_index]
        data.qpos[:] = state[env.physics.qpos_slice]
        mujoco.mj_kinematics(model, data)
        renderer.update_scene(data, camera)
        image = renderer.render()
        if show_reference:
            ref_data.qpos[:] = env.reference_qpos(env_index)
            mujoco.mj_kinematics(model, ref_data)
            renderer.update_scene(ref_data, camera)
            image = np.concatenate((image, renderer.render()), axis=1)
        frames.append(image.copy())
    renderer.close()
    return _write(frames, Path(path), 1.0 / env.step_dt)
