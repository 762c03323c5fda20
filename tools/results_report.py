"""docs/results.md from the runs of ``tools/results.py``: tables of the mean and range over seeds, the AMP verdict
against issue 34's numbers, teacher against student, and curves with seed bands (``docs/img/results_<clip>.png``)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from eval_history import read_history  # tools/eval_history.py

from mimic_rl.run_dirs import read_jsonl

QUALITY = (
    ("foot_slide_mm_s", "foot sliding mm/s", ".0f"),
    ("joint_jerk", "jerk rad/s³", ".0f"),
    ("torque_rms_nm", "torque RMS N m", ".1f"),
    ("power_w", "power W", ".0f"),
    ("penetration_mm", "penetration mm", ".1f"),
)
PAUSE_S = 600.0
"""A gap between two logged iterations longer than this is a pause (a stopped run), not training time."""


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _spread(values: list[float], fmt: str = ".1f") -> str:
    """``mean [min-max]`` of the seeds' values (the mean alone for one)."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return format(mean, fmt)
    return f"{mean:{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def _mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def training_hours(run: Path) -> float | None:
    """Training wall time of a run from its ``metrics.jsonl`` clock, pauses (gaps > ``PAUSE_S``) left out."""
    stamps = sorted(row["time"] for row in read_jsonl(run / "metrics.jsonl") if "time" in row)
    gaps = [b - a for a, b in itertools.pairwise(stamps) if b - a < PAUSE_S]
    return sum(gaps) / 3600 if gaps else None


def _summaries(jobs: list[Any], runs: Path, file: str) -> dict[str, dict[str, Any]]:
    """``{job name: summary}`` of the finished jobs' ``file`` (e.g. results_eval.json)."""
    out = {}
    for job in jobs:
        data = _load(runs / job.name / file)
        if data is not None:
            out[job.name] = data["summary"]
    return out


def amp_section(clip: Any, jobs: list[Any], runs: Path, plotted: bool) -> list[str]:
    """The PPO / AMP table of one clip, the verdict against issue 34's numbers and the curves' image."""
    lines = [
        f"### {clip.key}: `{Path(clip.motion).name}`, {clip.iterations} iterations "
        f"({clip.iterations * 6144 / 1e6:.2f} M env steps)",
        "",
    ]
    head = "| config | seeds | success | global MPJPE mm | root MPJPE mm | " + " | ".join(q[1] for q in QUALITY) + " |"
    lines += [head, "|" + "---|" * (5 + len(QUALITY))]
    evals, exact, means = _summaries(jobs, runs, "results_eval.json"), _summaries(jobs, runs, "results_exact.json"), {}
    for config in ("tracking_ppo", "tracking_ppo_amp"):
        names = [j.name for j in jobs if j.clip.key == clip.key and j.config == config]
        rows = [evals[n] for n in names if n in evals]
        if not rows:
            lines.append(f"| `{config}` | 0 of {len(names)} | not run yet |" + " |" * (2 + len(QUALITY)))
            continue
        cells = [_spread([r["success_rate"] for r in rows], ".2f")]
        cells += [_spread([r[k] for r in rows]) for k in ("global_mpjpe_mm", "root_mpjpe_mm")]
        cells += [_spread([r.get(k) for r in rows], fmt) for k, _, fmt in QUALITY]
        lines.append(f"| `{config}` | {len(rows)} of {len(names)} | " + " | ".join(cells) + " |")
        means[config] = {k: _mean([r.get(k) for r in rows]) for k in rows[0]}
        means[config]["n"] = len(rows)
        ex = [exact[n] for n in names if n in exact]
        means[config]["exact"] = (
            _spread([r["success_rate"] for r in ex], ".2f"),
            _spread([r["global_mpjpe_mm"] for r in ex]),
        )
    if means:
        exact_text = "; ".join(f"`{c}` {m['exact'][0]} / {m['exact'][1]} mm" for c, m in means.items())
        lines += ["", f"Success / global MPJPE from the exact first frame (no initial-state noise): {exact_text}."]
    lines.append("")
    lines += verdict(means)
    if plotted:
        lines += ["", f"![{clip.key}: training's evaluations](img/results_{clip.key}.png)"]
    return [*lines, ""]


def amp_settings() -> str:
    """The settings of ``configs/tracking_ppo_amp.yaml`` that its ablations vary, as the report names them."""
    from mimic_rl.config import load_config

    cfg = load_config("tracking_ppo_amp")
    amp = cfg.algorithm["amp_cfg"]
    return (
        f"`style_weight: {amp['style_weight']}`, `env.amp_features: {cfg.env.amp_features}`, "
        f"R1 weight {amp['gradient_penalty_coef']}"
    )


def verdict(means: dict[str, dict[str, Any]]) -> list[str]:
    """Issue 34's numbers: AMP's success within 0.05 of PPO, root MPJPE within 10 %, foot sliding or jerk -15 %."""
    if len(means) < 2:
        return ["Verdict: needs both configs."]
    ppo, amp = means["tracking_ppo"], means["tracking_ppo_amp"]
    if ppo["n"] < 3 or amp["n"] < 3:
        return [f"Verdict: not yet (seeds: PPO {ppo['n']}, AMP {amp['n']} of 3)."]

    def change(key: str) -> float | None:
        return None if not ppo.get(key) or amp.get(key) is None else amp[key] / ppo[key] - 1

    success, root = amp["success_rate"] - ppo["success_rate"], change("root_mpjpe_mm")
    slide, jerk = change("foot_slide_mm_s"), change("joint_jerk")
    ok = abs(success) <= 0.05 or success > 0
    ok = ok and root is not None and root <= 0.10
    ok = ok and ((slide is not None and slide <= -0.15) or (jerk is not None and jerk <= -0.15))
    pct = {k: "-" if v is None else f"{100 * v:+.1f} %" for k, v in (("root", root), ("slide", slide), ("jerk", jerk))}
    return [
        f"Verdict (AMP against PPO, means of 3 seeds): success {success:+.2f}, root MPJPE {pct['root']}, foot sliding "
        f"{pct['slide']}, jerk {pct['jerk']}: issue 34's target (success within 0.05, root MPJPE within +10 %, foot "
        f"sliding or jerk at least 15 % lower) is **{'met' if ok else 'not met'}**."
    ]


def distill_section(jobs: list[Any], runs: Path) -> list[str]:
    """Teacher against student per clip and seed: `mimic-rl eval`, exact start, sim2sim."""
    lines = [
        "## Today's default teacher and its deployable student",
        "",
        "Success / global MPJPE (mm), in brackets the student's global MPJPE against the teacher's in the same "
        "kind of evaluation (issue 33's target: success ≥ 0.9 and within +15 %). Teacher: `tracking_ppo` of the "
        "same seed; student: `mimic-rl distill --task distill_deploy` (sensor noise, latency, randomized "
        "physics).",
        "",
        "| clip, seed | teacher: `mimic-rl eval` | teacher: exact start | student: `mimic-rl eval` | "
        "student: exact start | student: sim2sim (64 seeds) |",
        "|---|---|---|---|---|---|",
    ]
    for job in (j for j in jobs if j.kind == "distill"):
        teacher = runs / str(job.teacher)
        t_eval, t_exact = (_load(teacher / f) for f in ("results_eval.json", "results_exact.json"))
        s_eval, s_exact, sim = (
            _load(runs / job.name / f) for f in ("results_eval.json", "results_exact.json", "results_sim2sim.json")
        )
        if s_eval is None:
            lines.append(f"| {job.clip.key}, {job.seed} | not run yet | | | | |")
            continue

        def cell(data: dict | None, ref: dict | None, success_key: str = "success_rate") -> str:
            if data is None:
                return "-"
            s = data["summary"]
            text = f"{s[success_key]:.2f} / {s['global_mpjpe_mm']:.1f}"
            if ref is not None:
                text += f" ({100 * (s['global_mpjpe_mm'] / ref['summary']['global_mpjpe_mm'] - 1):+.1f} %)"
            return text

        lines.append(
            f"| {job.clip.key}, {job.seed} | {cell(t_eval, None)} | {cell(t_exact, None)} | {cell(s_eval, t_eval)} "
            f"| {cell(s_exact, t_exact)} | {cell(sim, t_exact, 'success')} |"
        )
    return [*lines, ""]


def plot_curves(clip: Any, jobs: list[Any], runs: Path, image: Path) -> bool:
    """Success and global MPJPE of the training's evaluations against env steps, per config the mean over seeds and a
    band from the lowest to the highest; False when no run has evaluations yet."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    drawn = False
    for config, color in (("tracking_ppo", "tab:blue"), ("tracking_ppo_amp", "tab:orange")):
        series = []
        for job in (j for j in jobs if j.clip.key == clip.key and j.config == config):
            rows = read_history(runs / job.name / "evals.jsonl")
            if rows:
                series.append({r["total_steps"]: r["summary"] for r in rows})
        if not series:
            continue
        steps = sorted(set.intersection(*(set(s) for s in series)))
        for ax, key in zip(axes, ("success_rate", "global_mpjpe_mm")):
            values = [[s[t][key] for s in series] for t in steps]
            x = [t / 1e6 for t in steps]
            ax.plot(x, [sum(v) / len(v) for v in values], color=color, label=f"{config} ({len(series)} seeds)")
            ax.fill_between(x, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
            drawn = True
    for ax, label in zip(axes, ("success (from the first frame)", "global MPJPE (mm)")):
        ax.set_xlabel("env steps (M)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if drawn:
        axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{clip.key}: the training's evaluations, mean and range over seeds")
    fig.tight_layout()
    if drawn:
        image.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(image, dpi=110)
    plt.close(fig)
    return drawn


def amp_walk_section(jobs: list[Any], runs: Path, output: Path) -> list[str]:
    """The style-only walk's table (``results_report.json`` of ``tools/amp_walk_report.py``), its targets (no fall in
    >= 90 % of 20 s episodes, mean speed within 20 % of the command, within 30 M env steps), curves and videos."""
    walks = [j for j in jobs if j.config == "amp_walk"]
    if not walks:
        return []
    lines = [
        "## Style-only walking (`amp_walk`)",
        "",
        "`mimic-rl train --task amp_walk` on humanoid28 with `humanoid_walk.npz` as the AMP expert, no tracking "
        "reward ([guide.md](guide.md#style-only-amp-walking-amp_walk)). Evaluated by `tools/amp_walk_report.py`: 64 "
        "envs, one 20 s episode each from a random frame of the clip, a random command (1-2 m/s, +-45 degrees), no "
        "domain randomization. Speed: the mean over each env's episode of the pelvis velocity along the commanded "
        "heading, against the command. Discriminator: the run's own, on the policy's consecutive-state pairs and on as "
        "many of the clip's (LSGAN: targets +1 expert, -1 policy; style reward max(0, 1 - (D - 1)^2 / 4)).",
        "",
        "| seed | checkpoint | no fall | speed / command m/s (ratio) | envs within 20 % | velocity error m/s "
        "| D policy / expert | style reward policy / expert | foot sliding mm/s | jerk rad/s³ |",
        "|" + "---|" * 10,
    ]
    verdicts = []
    for job in walks:
        data = _load(runs / job.name / "results_report.json")
        if data is None:
            lines.append(f"| {job.seed} | not run yet |" + " |" * 8)
            continue
        w, d = data["walking"], data["discriminator"]
        it = int(Path(data["checkpoint"]).stem.split("_")[1])
        steps = it * 6144 / 1e6
        lines.append(
            f"| {job.seed} | {it} it. ({steps:.1f} M env steps) | {w['no_fall_rate']:.2f} | "
            f"{w['speed_along_command_m_s']:.2f} / {w['command_speed_m_s']:.2f} ({w['speed_ratio']:.2f}) | "
            f"{100 * w['within_20_percent']:.0f} % | {w['velocity_error_m_s']:.2f} | "
            f"{d['policy_logit']:.2f} / {d['expert_logit']:.2f} | "
            f"{d['policy_style_reward']:.3f} / {d['expert_style_reward']:.3f} | "
            f"{_num(w.get('foot_slide_mm_s'), '.0f')} | {_num(w.get('joint_jerk'), '.0f')} |"
        )
        bins = _speed_bins(w.get("per_env"))
        if bins:
            verdicts.append(f"seed {job.seed}, mean speed by commanded speed: {bins}")
        met = w["no_fall_rate"] >= 0.9 and abs(w["speed_ratio"] - 1.0) <= 0.2 and steps <= 30.0
        verdicts.append(f"seed {job.seed}: {'meets' if met else 'misses'} the target at {steps:.1f} M env steps")
        videos = sorted((runs / job.name).glob("results_walk_*.mp4"), key=lambda p: int(p.stem.split("_")[-1]))
        if videos:  # the latest checkpoint's
            target = output.parent / "img" / f"amp_walk_s{job.seed}.mp4"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(videos[-1].read_bytes())
            it = videos[-1].stem.split("_")[-1]
            verdicts.append(f"[video of seed {job.seed}](img/amp_walk_s{job.seed}.mp4) (iteration {it}, 10 s, env 0)")
    lines += ["", "Target (no fall in >= 90 % of the envs, speed within 20 % of the command, <= 30 M env steps): "]
    lines[-1] += "; ".join(verdicts) + "." if verdicts else "not run yet."
    image = output.parent / "img" / "results_amp_walk.png"
    if plot_walk_curves(walks, runs, image):
        lines += ["", "![amp_walk: training curves](img/results_amp_walk.png)"]
    return [*lines, ""]


def _speed_bins(per_env: dict[str, list[float]] | None, edges: tuple[float, ...] = (1.0, 4 / 3, 5 / 3, 2.0)) -> str:
    """ "commanded a-b m/s: mean speed (n envs)" for the thirds of the default command range."""
    if not per_env:
        return ""
    pairs = list(zip(per_env["command_m_s"], per_env["speed_along_command_m_s"]))
    parts = []
    for low, high in itertools.pairwise(edges):
        inside = [v for c, v in pairs if low <= c < high or (high == edges[-1] and c == high)]
        if inside:
            parts.append(f"{low:.2f}-{high:.2f}: {sum(inside) / len(inside):.2f} ({len(inside)} envs)")
    return "; ".join(parts)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def plot_walk_curves(walks: list[Any], runs: Path, image: Path) -> bool:
    """Episode length, speed over command and style reward over env steps, one line per seed; False without data."""
    series = {}
    for job in walks:
        rows = read_jsonl(runs / job.name / "metrics.jsonl")
        if rows:
            series[job.seed] = [r for r in rows if "episode/length" in r]
    if not any(series.values()):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for seed, rows in series.items():
        steps = [r["perf/total_steps"] / 1e6 for r in rows]
        axes[0].plot(steps, [r["episode/length"] * 0.02 for r in rows], label=f"seed {seed}")
        ratio = [r["metrics/speed_along_command"] / max(1e-6, r["metrics/command_speed"]) for r in rows]
        axes[1].plot(steps, ratio, label=f"seed {seed}")
        axes[2].plot(steps, [r.get("amp_style_reward", float("nan")) for r in rows], label=f"seed {seed}")
    titles = ("episode length s (20 s: no fall)", "speed along the command / command", "style reward (policy pairs)")
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("M env steps")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    image.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(image, dpi=90)
    plt.close(fig)
    return True


def write_report(jobs: list[Any], runs: Path, output: Path, machine: str) -> None:
    """Write ``output`` (docs/results.md) and its curves from the runs under ``runs``."""
    hours = [training_hours(runs / j.name) for j in jobs]
    done = sum(h is not None for h in hours)
    lines = [
        "# Results: PPO against PPO + AMP, teacher against student",
        "",
        "Regenerated by `python tools/results.py` (resumable; `--plan` shows what is left, `--report-only` rewrites "
        "this file). Every evaluation plays each clip from its first frame: `mimic-rl eval --num-envs 64` with the "
        "initial-state noise unless it says exact start. Quality metrics are defined in "
        "[guide.md](guide.md#metrics-and-what-they-mean). Mean over seeds, in brackets the lowest and highest.",
        "",
        f"Machine of the last regeneration: {machine}. Training wall time of the {done} runs that have started: "
        f"{sum(h for h in hours if h is not None):.1f} h in all (each run one thread, pauses left out; two at once "
        "on 2 cores).",
        "",
        "## Tracking: `tracking_ppo` against `tracking_ppo_amp`",
        "",
        f"`tracking_ppo_amp` as configured ({amp_settings()}). Both at `algorithm.desired_kl=0.01`, the default "
        "when they were measured (0.02 since issue 30; `tools/results.py` pins 0.01). The other settings tried (style "
        "weights, the discriminator's features and R1 weight) and what limits AMP here: "
        "[ablations.md](ablations.md#what-amp-buys-on-tracking-issue-34).",
        "",
    ]
    clips = list({j.clip.key: j.clip for j in jobs if j.config != "amp_walk"}.values())
    for clip in clips:
        image = output.parent / "img" / f"results_{clip.key}.png"
        lines += amp_section(clip, jobs, runs, plot_curves(clip, jobs, runs, image))
    lines += distill_section(jobs, runs)
    lines += amp_walk_section(jobs, runs, output)
    output.write_text("\n".join(lines))
