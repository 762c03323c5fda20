"""N MuJoCo simulations stepped in parallel with ``mujoco.rollout`` (C threads, the GIL released).

Each env's full physics state is a row of ``state``; a policy step runs ``decimation`` physics steps for all envs in
one ``rollout`` call and keeps the sensor readings of the last one. Domain randomization uses a small set of
randomized model variants (friction, centre-of-mass offset, PD gain scale); every env is assigned a variant at reset,
so memory stays bounded whatever the number of envs. Results do not depend on the thread count.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Annotated

import mujoco
import numpy as np
from mujoco import rollout

from mimic_rl.utils import Range

__all__ = ["BatchedPhysics", "DomainRandomization"]

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS


@dataclass(frozen=True)
class DomainRandomization:
    """Physics randomization; ``enabled=False`` gives every env the nominal model and no pushes.

    Each kind is on or off by its switch: ``friction`` (on), ``com`` (on), ``pd_gains`` (on), ``link_masses`` (off)
    and ``pushes`` (on). A model variant draws one friction scale, one root centre-of-mass offset, one PD gain scale
    and one mass scale per body (mass and inertia together), each uniform in its range.
    """

    enabled: bool = True
    num_model_variants: Annotated[int, Range(1)] = 16
    friction: bool = True
    friction_scale: tuple[float, float] = (0.7, 1.3)
    com: bool = True
    com_offset: Annotated[float, Range(0)] = 0.02
    """Uniform +- metres added to the root body's centre of mass."""
    pd_gains: bool = True
    pd_gain_scale: tuple[float, float] = (0.9, 1.1)
    link_masses: bool = False
    link_mass_scale: tuple[float, float] = (0.9, 1.1)
    """Each body's mass and inertia are multiplied by a factor of this range (per body, per variant)."""
    pushes: bool = True
    push_interval_s: tuple[float, float] = (1.0, 3.0)
    push_velocity: Annotated[float, Range(0)] = 0.5
    """Maximum horizontal velocity (m/s) added to the root by a push."""


class BatchedPhysics:
    """The physics of ``num_envs`` copies of ``model``."""

    def __init__(
        self, model: mujoco.MjModel, num_envs: int, num_threads: int, dr: DomainRandomization, seed: int
    ) -> None:
        if num_envs < 1 or num_threads < 1:
            raise ValueError(f"need num_envs >= 1 and num_threads >= 1, got {num_envs} and {num_threads}")
        self.model = model
        self.num_envs = num_envs
        self.num_threads = num_threads
        self.nstate = mujoco.mj_stateSize(model, FULL_STATE)
        self.qpos_slice = slice(1, 1 + model.nq)
        self.qvel_slice = slice(1 + model.nq, 1 + model.nq + model.nv)
        self.rng = np.random.default_rng(seed)
        self.variants = [model]
        if dr.enabled:
            self.variants += [self._randomized(dr) for _ in range(max(0, dr.num_model_variants - 1))]
        self.variant_of_env = np.zeros(num_envs, dtype=np.int64)
        self._models = [model] * num_envs
        self._datas = [mujoco.MjData(model) for _ in range(num_threads)]
        self._pool = rollout.Rollout(nthread=num_threads) if num_threads > 1 else None
        data = mujoco.MjData(model)
        mujoco.mj_resetData(model, data)
        row = np.empty(self.nstate)
        mujoco.mj_getState(model, data, row, FULL_STATE)
        self.state = np.tile(row, (num_envs, 1))
        self.sensordata = np.zeros((num_envs, model.nsensordata))
        self._out_state: np.ndarray | None = None
        self._out_sensor: np.ndarray | None = None

    def _randomized(self, dr: DomainRandomization) -> mujoco.MjModel:
        m = copy.copy(self.model)
        if dr.friction:
            m.geom_friction[:, 0] *= self.rng.uniform(*dr.friction_scale)
        if dr.com:
            m.body_ipos[1] += self.rng.uniform(-dr.com_offset, dr.com_offset, size=3)
        if dr.pd_gains:
            scale = self.rng.uniform(*dr.pd_gain_scale)
            m.actuator_gainprm[:, 0] *= scale
            m.actuator_biasprm[:, 1:3] *= scale
        if dr.link_masses:
            mass = self.rng.uniform(*dr.link_mass_scale, size=m.nbody)
            mass[0] = 1.0  # the world body
            m.body_mass[:] = m.body_mass * mass
            m.body_inertia[:] = m.body_inertia * mass[:, None]
        return m

    def assign_variants(self, env_ids: np.ndarray, variants: np.ndarray | None = None) -> None:
        """Give each env in ``env_ids`` a random model variant (variant 0 is the nominal model).

        With ``variants`` (one per env), set all envs' variants to those instead (restoring a saved state).
        """
        if variants is None:
            self.variant_of_env[env_ids] = self.rng.integers(0, len(self.variants), size=len(env_ids))
        else:
            self.variant_of_env[:] = variants
            env_ids = np.arange(self.num_envs)
        for i in env_ids:
            self._models[i] = self.variants[self.variant_of_env[i]]

    def step(self, ctrl: np.ndarray, nstep: int) -> np.ndarray:
        """Run ``nstep`` physics steps of every env with constant ``ctrl [N, nu]``; returns the last sensor readings.

        MuJoCo evaluates sensors at the start of a step, so the readings describe the state one physics step before
        the final one (the env treats this as a sensor latency of one physics step).
        """
        n = self.num_envs
        if self._out_state is None or self._out_state.shape[1] != nstep:
            self._out_state = np.empty((n, nstep, self.nstate))
            self._out_sensor = np.empty((n, nstep, self.model.nsensordata))
        control = np.ascontiguousarray(np.broadcast_to(ctrl[:, None, :], (n, nstep, ctrl.shape[1])))
        run = self._pool.rollout if self._pool is not None else rollout.rollout
        run(
            self._models,
            self._datas,
            self.state,
            control,
            nstep=nstep,
            state=self._out_state,
            sensordata=self._out_sensor,
            skip_checks=True,
        )
        self.state[:] = self._out_state[:, -1]
        self.sensordata[:] = self._out_sensor[:, -1]
        return self.sensordata

    def set_state(self, env_ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Overwrite positions and velocities of some envs (time is kept; actuator state, if any, is zeroed)."""
        self.state[env_ids, self.qpos_slice] = qpos
        self.state[env_ids, self.qvel_slice] = qvel
        self.state[env_ids, self.qvel_slice.stop :] = 0.0

    def add_root_velocity(self, env_ids: np.ndarray, velocity: np.ndarray) -> None:
        """Add a world-frame linear velocity ``[k, 3]`` to the root of some envs (a push)."""
        start = self.qvel_slice.start
        self.state[env_ids, start : start + 3] += velocity

    def refresh_sensors(self, env_ids: np.ndarray) -> None:
        """Evaluate the sensors of some envs at their current state (after a reset), in the rollout's threads.

        One physics step of each from its state, its end state discarded: MuJoCo evaluates sensors at the start of
        a step, so its readings are those of the state itself (``mj_forward``'s; the env's sensors read positions
        and velocities, which the controls do not change).
        """
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        sensors = np.empty((ids.size, 1, self.model.nsensordata))
        control = np.zeros((ids.size, 1, self.model.nu))
        run = self._pool.rollout if self._pool is not None else rollout.rollout
        models = [self._models[i] for i in ids]
        run(models, self._datas, self.state[ids], control, nstep=1, sensordata=sensors, skip_checks=True)
        self.sensordata[ids] = sensors[:, 0]

    def close(self) -> None:
        """Stop the thread pool."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
