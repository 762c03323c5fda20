"""Offscreen rendering of an env's rollout (optionally beside its reference) to GIF or MP4 with ``mujoco.Renderer``.

Rendering needs an OpenGL backend: the one ``MUJOCO_GL`` names, else the first of EGL (GPU drivers or Mesa), OSMesa and
GLFW that works (``opengl.offscreen_renderer``). Without one, ``render_rollout`` raises ``RenderingUnavailable`` with
what to install. GIFs are written with Pillow (a matplotlib dependency); MP4 (smaller and faster) needs ``imageio``
with ``imageio-ffmpeg`` (``pip install 'mimic_rl[video]'``).
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


def _label(image: np.ndarray, text: str) -> np.ndarray:
    """``image`` with ``text`` in its top-left corner (white on a dark box)."""
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.fromarray(image)
    draw = ImageDraw.Draw(picture)
    size = max(12, image.shape[0] // 18)
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one fixed-size default font
        font = ImageFont.load_default()
    box = draw.textbbox((8, 6), text, font=font)
    draw.rectangle((box[0] - 4, box[1] - 3, box[2] + 4, box[3] + 3), fill=(20, 20, 20))
    draw.text((8, 6), text, fill=(255, 255, 255), font=font)
    return np.asarray(picture)


class _VideoWriter:
    """Frames to a GIF (Pillow, a matplotlib dependency) or an MP4 (imageio with imageio-ffmpeg, streamed)."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path, self.fps = path, fps
        self.frames: list[np.ndarray] = []
        self._mp4 = None
        suffix = path.suffix.lower()
        if suffix not in (".gif", ".mp4"):
            raise RenderingUnavailable(f"{path}: --video: expected a .gif or .mp4 file name, found {suffix!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".mp4":
            try:
                import imageio.v2 as imageio
                import imageio_ffmpeg  # noqa: F401
            except ImportError:
                raise RenderingUnavailable(
                    f"{path}: --video: writing MP4 needs imageio and imageio-ffmpeg; pip install 'mimic_rl[video]', "
                    "or write a .gif"
                ) from None
            self._mp4 = imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=8)

    def add(self, frame: np.ndarray) -> None:
        """Append one RGB frame."""
        if self._mp4 is not None:
            self._mp4.append_data(frame)
        else:
            self.frames.append(frame)

    def close(self) -> Path:
        """Finish the file; returns its path."""
        if self._mp4 is not None:
            self._mp4.close()
        else:
            from PIL import Image

            images = [Image.fromarray(f) for f in self.frames]
            duration = round(1000 / self.fps)
            images[0].save(self.path, save_all=True, append_images=images[1:], duration=duration, loop=0)
        return self.path


def _follow(camera: mujoco.MjvCamera, data: mujoco.MjData) -> None:
    """Point the camera at the root body, at a fixed height (the view follows the robot, without bobbing)."""
    camera.lookat[:] = (data.xpos[1, 0], data.xpos[1, 1], 0.8)


def _status(env: Any, extras: dict[str, Any], env_index: int) -> str:
    """The label's status of env ``env_index``: the env's own ``video_label`` where it has one, else the global
    MPJPE."""
    label = getattr(env, "video_label", None)
    if label is not None:
        return label(extras, env_index)
    error = float(extras["tracking"]["global_mpjpe_mm"][env_index]) if "tracking" in extras else float("nan")
    return f"global MPJPE {error:.0f} mm"


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
    """Roll out ``policy`` (default: zero actions) in ``env`` and write env ``env_index``'s video to ``path``
    (``.gif`` or ``.mp4``).

    The camera follows the robot; with ``show_reference`` the reference motion is drawn beside it in a second panel
    whose camera follows the reference (unless the env's ``video_reference`` is False). Panels are labelled, with the
    time and the current global MPJPE (or the env's ``video_label(extras, env_index)``).
    ``on_dones`` is called with each step's dones, e.g. ``actor.reset`` so that a recurrent policy starts every new
    episode from a zero state.
    """
    model = env.model
    writer = _VideoWriter(Path(path), 1.0 / env.step_dt)
    renderer = offscreen_renderer(model, width, height)
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
        renderer.scene.flags[flag] = False  # 3-4x faster with software OpenGL (Mesa), hardly missed in a tracking video
    data, ref_data = mujoco.MjData(model), mujoco.MjData(model)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.distance, camera.elevation, camera.azimuth = 3.0, -15.0, 90.0
    obs = env.get_observations()
    zero = torch.zeros(env.num_envs, env.num_actions, device=env.device)
    try:
        for step in range(steps):
            with torch.inference_mode():
                actions = policy(obs) if policy is not None else zero
            obs, _, dones, extras = env.step(actions)
            if on_dones is not None:
                on_dones(dones)
            data.qpos[:] = env.physics.state[env_index][env.physics.qpos_slice]
            mujoco.mj_kinematics(model, data)
            _follow(camera, data)
            renderer.update_scene(data, camera)
            text = f"robot  t={(step + 1) * env.step_dt:.2f}s  {_status(env, extras, env_index)}"
            image = _label(renderer.render(), text)
            if show_reference and getattr(env, "video_reference", True):
                ref_data.qpos[:] = env.reference_qpos(env_index)
                mujoco.mj_kinematics(model, ref_data)
                _follow(camera, ref_data)
                renderer.update_scene(ref_data, camera)
                image = np.concatenate((image, _label(renderer.render(), "reference")), axis=1)
            writer.add(image)
    finally:
        renderer.close()
    return writer.close()
