"""OnPolicyRunner: builds the env and MMPPO from a ``TrainConfig``, collects, updates, logs and checkpoints.

Collection runs under ``torch.inference_mode``. Time-outs bootstrap from the env's ``final_observations``; AMP, RND
and DAgger run when the algorithm config has them. Checkpoints are written atomically and hold everything an exact
resume needs (models, optimizers, normalizers, the env's and every random generator's state), so on the CPU
N iterations plus a resume of N more equal 2N iterations bitwise. Under ``torchrun`` only rank 0 logs and saves.
"""

from __future__ import annotations

import copy
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mimic_rl.algorithms.distributed import init_distributed, multi_gpu_config_from_env
from mimic_rl.algorithms.ppo import MMPPO
from mimic_rl.config import TrainConfig, save_config, to_dict
from mimic_rl.errors import CheckpointError
from mimic_rl.runners.checkpoint import (
    BEST_CHECKPOINT,
    beats_best,
    best_record,
    capture_rng_state,
    load_checkpoint,
    read_best_record,
    remove_orphan_checkpoints,
    restore_rng_state,
    save_checkpoint,
)
from mimic_rl.runners.compat import carry_fits, check_checkpoint_fits, check_state_fits
from mimic_rl.runners.episodes import EpisodeStats
from mimic_rl.runners.logging import RunLogger, append_eval_history, evaluated_iterations
from mimic_rl.runners.threads import apply_threads, resolve_threads
from mimic_rl.tasks.tracking.from_start import eval_scalars, failure_summary
from mimic_rl.utils import check_device

__all__ = ["OnPolicyRunner", "make_env", "seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_env(cfg: TrainConfig, rank: int = 0) -> Any:
    """The env of ``cfg``, from the backend ``cfg.env.backend`` names (each distributed rank gets its own seed)."""
    from mimic_rl.envs.registry import make_env as make_backend_env

    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.seed = cfg.env.seed + rank
    env_cfg.device = cfg.runner.device
    return make_backend_env(env_cfg)


class OnPolicyRunner:
    """Trains MMPPO on a vectorized env; ``learn()`` runs iterations, ``save()`` / ``load()`` checkpoint."""

    def __init__(self, cfg: TrainConfig | Any, log_dir: str | Path | None = None, env: Any | None = None) -> None:
        self.cfg = cfg
        self.multi_gpu = multi_gpu_config_from_env()
        self.rank = self.multi_gpu.global_rank if self.multi_gpu else 0
        device = torch.device(check_device(cfg.runner.device, "runner.device"))
        if self.multi_gpu is not None and device.type == "cuda" and device.index is None:
            device = torch.device("cuda", self.multi_gpu.local_rank)  # one GPU per local rank
            cfg.runner.device = str(device)
        self.device = device
        if self.multi_gpu is not None:
            init_distributed(self.multi_gpu, self.device)
        self.threads = apply_threads(resolve_threads(getattr(cfg.runner, "threads", None)))
        """The CPU threads of this run (torch's pool; the embedded env's MuJoCo pool takes the same number)."""
        seed_everything(cfg.runner.seed + self.rank)
        self._own_env = env is None
        """The env was built from ``cfg.env`` (not passed in)."""
        self.env = env if env is not None else make_env(cfg, self.rank)
        self.alg = self._build_algorithm(self.env.get_observations())
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.is_main = self.rank == 0 and self.log_dir is not None
        self.logger: RunLogger | None = None
        """Opened by ``learn()``: a run that fails to start (a bad config, checkpoint or env) writes nothing."""
        self._warned = {"nonfinite_batches": 0.0, "nonfinite_obs_rows": 0.0}
        self._saved_iteration = -1
        self.best_eval: dict[str, float] | None = None
        """The record of ``model_best.pt`` (``runner.keep_best``), read from the run folder at the first evaluation."""
        self._best_read = False
        self.iteration = 0
        self.total_steps = 0
        self.total_time = 0.0
        self.episodes = EpisodeStats(self.env.num_envs, self.device)

    def _build_algorithm(self, obs: Any) -> Any:
        """MMPPO, its models and storage from the config."""
        alg_cfg = {
            "algorithm": dict(self.cfg.algorithm),
            "actor": dict(self.cfg.actor),
            "critic": dict(self.cfg.critic),
            "num_steps_per_env": self.cfg.runner.num_steps_per_env,
            "obs_groups": getattr(self.cfg, "obs_groups", None),
            "multi_gpu": None if self.multi_gpu is None else vars(self.multi_gpu),
        }
        return MMPPO.construct_algorithm(obs, self.env, alg_cfg, self.device)

    # ------------------------------------------------------------------ training
    def _open_logs(self) -> RunLogger:
        """The run folder's files, at the start of the first ``learn()``: the resolved config, the logs; temporary
        checkpoint files left by a killed run are removed."""
        if self.logger is None:
            if self.is_main:
                remove_orphan_checkpoints(self.log_dir)
                save_config(self.cfg, self.log_dir / "config.yaml")
            runner_cfg = self.cfg.runner
            self.logger = RunLogger(
                self.log_dir or ".", runner_cfg.logger, runner_cfg.wandb_project, to_dict(self.cfg), self.is_main
            )
        return self.logger

    def learn(self, num_iterations: int | None = None) -> dict[str, float]:
        """Run ``num_iterations`` (default: the config's ``max_iterations``) or until the time budget is spent."""
        self._open_logs()
        total = num_iterations if num_iterations is not None else self.cfg.runner.max_iterations
        budget = self.cfg.runner.time_budget_s
        start_iteration, start_time = self.iteration, time.time()
        obs = self.env.get_observations().to(self.device)
        self.alg.train_mode()
        last: dict[str, float] = {}
        try:
            if self._evaluation_missing():
                last.update(self.evaluate_from_start())
            for _ in range(total):
                obs, last = self._iteration(obs, start_iteration, total, start_time)
                if self.iteration % self.cfg.runner.save_interval == 0:
                    self._save_iteration()
                interval = self.cfg.runner.eval_interval
                if interval and self.iteration % interval == 0:
                    last.update(self.evaluate_from_start())
                if budget is not None and time.time() - start_time >= budget:
                    break
        except (KeyboardInterrupt, BrokenPipeError) as exc:  # Ctrl-C, SIGTERM or a closed stdout (`| head`): keep
            path = self._save_iteration()  # what was learned (the models of the last finished iteration)
            if path is not None:
                stream = sys.stderr if isinstance(exc, BrokenPipeError) else sys.stdout  # stdout gone: say it on stderr
                print(f"interrupted: saved {path} (resume with --resume)", file=stream, flush=True)
            raise
        self._save_iteration()
        return last

    def _evaluation_missing(self) -> bool:
        """Whether the run folder lacks the evaluation of the iteration training starts from, one that
        ``runner.eval_interval`` asks for: a run stopped (Ctrl-C, SIGTERM) during the evaluation after a save resumes
        with it, and a branch into a new folder starts with the evaluation of its checkpoint."""
        interval = self.cfg.runner.eval_interval
        if not self.is_main or not interval or self.iteration == 0 or self.iteration % interval:
            return False
        return self.iteration not in evaluated_iterations(self.log_dir / "evals.jsonl")

    def _iteration(self, obs: Any, start_iteration: int, total: int, start_time: float) -> tuple[Any, dict]:
        """Collect one rollout, update, count and log; returns (the next observations, the logged scalars)."""
        t0 = time.time()
        logs: dict[str, list] = {}  # key -> [sum, number of steps that logged it]
        with torch.inference_mode():
            for _ in range(self.cfg.runner.num_steps_per_env):
                actions = self.alg.act(obs)
                obs, rewards, dones, extras = self.env.step(actions)
                self.alg.process_env_step(obs, rewards, dones, extras)
                for key, value in extras.get("log", {}).items():
                    entry = logs.setdefault(key, [0.0, 0])
                    entry[0], entry[1] = entry[0] + value, entry[1] + 1
                self.episodes.step(rewards, dones, extras.get("time_outs"), extras.get("termination_terms"))
            self.alg.compute_returns(obs)
        collect_time = time.time() - t0
        losses = self.alg.update()
        learn_time = time.time() - t0 - collect_time
        self.iteration += 1
        steps = self.env.num_envs * self.cfg.runner.num_steps_per_env
        self.total_steps += steps * (self.multi_gpu.world_size if self.multi_gpu else 1)
        self.total_time += time.time() - t0
        scalars = self._log(logs, losses, steps, collect_time, learn_time, start_iteration, total, start_time)
        return obs, scalars

    def evaluate_from_start(self) -> dict[str, float]:
        """Evaluate the current policy from each clip's first frame (``runner.eval_envs`` envs per clip), log the mean
        success and global / root-relative MPJPE as ``eval/*`` (with several clips, each clip's as
        ``eval/<clip>/*``), append every clip's entry to ``evals.jsonl`` and return the scalars (main rank only; {} for
        an env passed in without a motion library, such as a toy env: the config's env is not the one trained on)."""
        if not self.is_main or (not self._own_env and not hasattr(self.env, "library")):
            return {}
        from mimic_rl.runners.evaluation import evaluate_policy

        policy = self.alg.get_policy()
        hidden = policy.memory.hidden if policy.memory is not None else None
        rng = capture_rng_state()  # evaluating leaves training's random streams as they were (bitwise resume)
        evaluation = evaluate_policy(policy, self.cfg, num_envs=self.cfg.runner.eval_envs)
        restore_rng_state(rng)
        if policy.memory is not None:
            policy.memory.hidden = hidden  # the collection-time state of a recurrent policy
        self.alg.train_mode()
        scalars = eval_scalars(evaluation)
        scalars["perf/total_steps"] = self.total_steps
        best = ""
        if self.logger is not None:  # called outside learn(): return the numbers, log nothing
            self.logger.log(self.iteration, scalars)
            append_eval_history(self.log_dir / "evals.jsonl", self.iteration, self.total_steps, evaluation)
            best = self._keep_best(scalars)
        print(
            f"eval from the clips' start at iteration {self.iteration} ({self.total_steps / 1e6:.2f} M env steps): "
            f"success {scalars['eval/success_rate']:.2f}, global MPJPE {scalars['eval/global_mpjpe_mm']:.1f} mm, "
            f"root-relative MPJPE {scalars['eval/root_mpjpe_mm']:.1f} mm, "
            f"{100 * scalars['eval/episode_length_fraction']:.0f}% of the clip{failure_summary(evaluation['clips'])}"
            f"{best}",
            flush=True,
        )
        return scalars

    def _keep_best(self, scalars: dict[str, float]) -> str:
        """Write ``model_best.pt`` when this evaluation beats the run folder's best so far (``runner.keep_best``);
        returns the note for the evaluation's line ("" when nothing was written)."""
        if not getattr(self.cfg.runner, "keep_best", False):
            return ""
        path = self.log_dir / BEST_CHECKPOINT
        if not self._best_read:  # a resumed run (or one resumed from an earlier checkpoint) keeps the folder's best
            self._best_read = True
            try:
                self.best_eval = read_best_record(path)
            except CheckpointError as error:  # an unreadable file is replaced, not a reason to stop training
                print(f"warning: {path} could not be read ({error}); the next best evaluation replaces it", flush=True)
        record = best_record(self.iteration, self.total_steps, scalars)
        if not beats_best(record, self.best_eval, getattr(self.cfg.runner, "best_by", "mean")):
            return ""
        state = self.state_dict()
        state["best_eval"] = record
        save_checkpoint(state, path)
        self.best_eval = record
        return f"; the best so far: {path.name}"

    def _save_iteration(self) -> Path | None:
        """``model_<iteration>.pt`` on the main rank, unless this iteration is saved already."""
        if not self.is_main or self._saved_iteration == self.iteration:
            return None
        path = self.save(self.log_dir / f"model_{self.iteration}.pt")
        self._saved_iteration = self.iteration  # only once written: a save cut short by Ctrl-C/SIGTERM is redone
        return path

    def _log(self, logs, losses, steps, collect_time, learn_time, start_iteration, total, start_time):
        # the mean over the steps that logged a key: every step for the embedded env, only steps with resets for
        # mjlab's and Isaac Lab's episode sums (rsl_rl's convention)
        scalars = {f"env/{k}" if "/" not in k else k: float(v) / n for k, (v, n) in logs.items()}
        scalars.update({f"loss/{k}": v for k, v in losses.items()})
        scalars.update(self.alg.collection_logs())
        scalars["perf/steps_per_s"] = steps / max(1e-9, collect_time + learn_time)
        scalars["perf/collection_time"] = collect_time
        scalars["perf/learning_time"] = learn_time
        scalars["perf/total_steps"] = self.total_steps
        scalars["perf/wall_time"] = self.total_time
        policy = getattr(self.alg, "actor", None) or getattr(self.alg, "student", None)
        if policy is not None and hasattr(policy, "head"):
            scalars["policy/mean_std"] = float(policy.head.std().detach().mean())  # rsl_rl's Policy/mean_std
        scalars.update(self.episodes.pop())
        if hasattr(self.env, "sampling_stats"):  # where episodes start (the embedded env's adaptive sampler)
            scalars.update(self.env.sampling_stats())
        done = self.iteration - start_iteration
        per_iteration = (time.time() - start_time) / max(1, done)
        remaining = total - done
        if self.cfg.runner.time_budget_s is not None:
            remaining = min(remaining, (self.cfg.runner.time_budget_s - (time.time() - start_time)) / per_iteration)
        self.logger.log(self.iteration, scalars)
        self.logger.print_line(self.iteration, start_iteration + total, scalars, remaining * per_iteration)
        self._warn_nonfinite(losses)
        return scalars

    def _warn_nonfinite(self, losses: dict[str, float]) -> None:
        """Say when an update skipped mini-batches or left observation rows out of the normalizers (NaN or inf)."""
        new = {k: losses.get(k, 0.0) - seen for k, seen in self._warned.items()}
        if self.is_main and (new["nonfinite_batches"] > 0 or new["nonfinite_obs_rows"] > 0):
            print(
                f"warning: iteration {self.iteration}: {new['nonfinite_batches']:.0f} mini-batches skipped (non-finite "
                f"loss or gradient), {new['nonfinite_obs_rows']:.0f} observation rows with NaN/inf left out of the "
                "normalizers; check the env's observations and rewards",
                flush=True,
            )
        self._warned = {k: losses.get(k, seen) for k, seen in self._warned.items()}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The full checkpoint: resolved config, algorithm, env, random states and counters."""
        state = self.alg.save()
        state.update(
            iteration=self.iteration,
            total_steps=self.total_steps,
            total_time=self.total_time,
            config=to_dict(self.cfg),
            rng=capture_rng_state(),
            algorithm_runtime=self.alg.runtime_state_dict(),
            runner=self.episodes.state_dict(),
        )
        if hasattr(self.env, "state_dict"):
            state["env_state"] = self.env.state_dict()
        return state

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint atomically (a crash mid-save leaves the previous file intact)."""
        return save_checkpoint(self.state_dict(), path)

    def load(
        self, path: str | Path, load_optimizer: bool = True, resume: bool = True, what: str = "--resume"
    ) -> dict[str, Any]:
        """Load a checkpoint; with ``resume``, also the env, random states and counters (an exact continuation).

        A checkpoint of another task (robot, observation layout, architecture) is a ``CheckpointError`` that says what
        differs (``what`` names the option the path came from). A checkpoint of the same task with another number of
        envs resumes the models, optimizer and counters with fresh episodes (not an exact continuation).
        """
        state = load_checkpoint(path, self.device, what)
        run_config = to_dict(self.cfg)
        load_cfg = self._load_cfg(load_optimizer, resume)
        check_checkpoint_fits(state, path, self._checked_models(), run_config, what)
        skip = tuple(name for name, on in load_cfg.items() if not on)
        saved_envs = int(state["runner"]["episode_reward"].shape[0]) if "runner" in state else self.env.num_envs
        exact = resume and saved_envs == self.env.num_envs  # the runtime state (rows per env) is restored too
        check_state_fits(state, path, self.alg.save(), run_config, what, skip)
        self.alg.load(state, load_cfg, strict=True)
        runtime = dict(state.get("algorithm_runtime") or {})
        if exact and not carry_fits(runtime.get("storage_carry"), self.alg.runtime_state_dict().get("storage_carry")):
            print(
                f"warning: {path} holds the rollout's carried step in another layout (an older version of the "
                "package): resuming with a fresh one (the first step's AMP pairs are masked out)"
            )
            runtime.pop("storage_carry", None)
        if resume:
            self.iteration = int(state.get("iteration", 0))
            self.total_steps = int(state.get("total_steps", 0))
            self.total_time = float(state.get("total_time", 0.0))
            if not exact:
                print(
                    f"warning: {path} was saved with {saved_envs} envs and this run has {self.env.num_envs}: resuming "
                    "the models, optimizer and counters with fresh episodes (not an exact continuation)"
                )
                return state
            if runtime:
                self.alg.load_runtime_state_dict(runtime)
            if "env_state" in state and hasattr(self.env, "load_state_dict"):
                self.env.load_state_dict(state["env_state"])
            if "runner" in state:
                self.episodes.load_state_dict(state["runner"])
            if "rng" in state:
                restore_rng_state(state["rng"])
        return state

    def _checked_models(self) -> dict[str, Any]:
        """The models a checkpoint must fit (by name: ``state[f"{name}_state_dict"]``)."""
        return {"actor": self.alg.actor, "critic": self.alg.critic}

    def _load_cfg(self, load_optimizer: bool, resume: bool) -> dict[str, bool]:
        return {
            "actor": True,
            "critic": True,
            "optimizer": load_optimizer,
            "iteration": resume,
            **dict.fromkeys(("rnd", "amp", *(ext.name for ext in self.alg.extensions)), True),
        }

    def close(self) -> None:
        """Close the logger and the env."""
        if self.logger is not None:
            self.logger.close()
        if hasattr(self.env, "close"):
            self.env.close()
