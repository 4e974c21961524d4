"""The report of the Fashion-MNIST sweep (`python scripts/fashion_sweep.py report`), read from the run folders,
their nfe.json files and speed.csv (`measure.py`), plus any speed_*.csv beside it: the same
inference measurements made on another CPU:

- the issue's goals, each a verdict computed from the files: met, missed or not yet measured;
- per phase (main, patch2, horizon): test accuracy (mean ± sample std over seeds, the difference to SDPA in
  the same form with its std), parameters, training images/s, inference images/s at 28² and 112², and for
  ODE rows dopri5's NFE;
- the horizon check's verdict per mixer (flat, or budget-limited: plan.md's rule);
- one table of accuracy beside inference speed (main and patch 2), and one more per other CPU measured;
- the inference measurements themselves, the tuning trials beside their models' inference speed, and the runs that
  vary one tuned hyper-parameter (atom learning rate, steered head count).

Every table is written by `ssog_lab.bench.report.markdown_table`. A section without data says so in one line,
so the report runs at any stage of the sweep.
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
from collections.abc import Callable
from pathlib import Path

from ...bench.report import markdown_table
from ...models import DEPTHS
from ...results.record import read_json
from ...results.stats import difference_std, mean_std
from .measure import NFE_IMAGES, NFE_RTOLS, SPEED_RESOLUTIONS, SweepRun, read_speed, run_folder
from .plan import DEPTH_TITLES, NFE_FILE, SSOG_MIXERS
from .speed import host_of, infer_cell, ok_speed, rate, run_speed, speed_index, speed_section

VERDICTS = ("met", "missed", "not yet measured")
WITHIN_POINTS = 2.0  # the goal for fixed SSoG: at most this many points below SDPA
HIGH, OWN = SPEED_RESOLUTIONS[-1], SPEED_RESOLUTIONS[0]


def _pm(mean: float, std: float, digits: int = 2) -> str:
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if math.isfinite(std) else f"{mean:.{digits}f}"


def train_speed(root: Path, run: SweepRun, summary: dict) -> float:
    """Training images/s of a finished run: the mean of the train CLI's per-epoch rates in metrics.jsonl (they
    survive a resume, while summary.json's train_seconds restarts with the process), else images × epochs /
    train_seconds."""
    path = run_folder(root, run) / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    rates = [r["images_per_s"] for r in records if r.get("kind") == "epoch" and r.get("images_per_s")]
    return statistics.mean(rates) if rates else run.train_images * summary["epochs_done"] / summary["train_seconds"]


def _nfe(root: Path, runs: list[SweepRun], field: str = "nfe") -> dict[float | str, list[float]]:
    """{rtol: `field` ("nfe" or "accuracy") of each dopri5 solve in the runs' nfe.json files}; for "accuracy"
    also {"trained": the accuracy with the solver the model was trained with, on the same images}."""
    out: dict[float | str, list[float]] = {}
    for run in runs:
        stored = read_json(run_folder(root, run) / NFE_FILE) or {}
        for entry in stored.get("dopri5", []):
            out.setdefault(entry["rtol"], []).append(entry[field])
        if field == "accuracy" and "trained_solver" in stored:
            out.setdefault("trained", []).append(stored["trained_solver"]["accuracy"])
    return out


def group_rows(root: Path, runs: list[SweepRun], keys: tuple[str, ...], speed: dict[tuple, dict] | None = None
               ) -> list[dict]:
    """One row per distinct `keys` of the finished runs: test accuracy (%) over seeds, parameters, training
    images/s, dopri5 NFE per rtol (ODE runs with nfe.json), inference rows of `speed_index` per resolution, and
    against SDPA of the same other keys: the accuracy difference with its std and the inference speed ratio."""
    groups: dict[tuple, list[tuple[SweepRun, dict]]] = {}
    for run in runs:
        summary = read_json(run_folder(root, run) / "summary.json")
        if summary is not None and summary.get("test_accuracy") is not None:
            groups.setdefault(tuple(run.labels[k] for k in keys), []).append((run, summary))
    rows = []
    for key, members in groups.items():
        accuracy = [100 * s["test_accuracy"] for _, s in members]
        labels = members[0][0].labels
        rows.append({**dict(zip(keys, key, strict=True)), "accuracy": mean_std(accuracy), "n": len(members),
                     "per_seed": accuracy, "parameters": members[0][1]["parameters"],
                     "epochs": "/".join(str(e) for e in sorted({s["epochs_done"] for _, s in members})),
                     "images_per_s": statistics.mean(train_speed(root, r, s) for r, s in members),
                     "ode": labels["depth"] == "ode", "nfe": _nfe(root, [r for r, _ in members]),
                     "solver_accuracy": _nfe(root, [r for r, _ in members], "accuracy"),
                     "infer": run_speed(members[0][0], speed)})
    for row in rows:  # the difference of means to SDPA in the same form, with the std of that difference
        base = next((r for r in rows if r["mixer"] == "sdpa" and all(r[k] == row[k] for k in keys if k != "mixer")),
                    None)
        if base is not None and row is not base:
            (m1, s1), (m0, s0) = row["accuracy"], base["accuracy"]
            row["vs_sdpa"] = m1 - m0, difference_std(s1, row["n"], s0, base["n"])
            row["speed_vs_sdpa"] = {res: (mine / theirs if (mine := ok_speed(row["infer"][res])) and
                                          (theirs := ok_speed(base["infer"][res])) else None)
                                    for res in SPEED_RESOLUTIONS}
    return rows


def _nfe_cell(rtol: float) -> Callable[[dict], str]:
    def cell(row: dict) -> str:
        if not row["ode"]:
            return "—"
        values = row["nfe"].get(rtol, [])
        if not values:
            return "–"
        text = _pm(*mean_std(values), digits=1)
        return text if len(values) == row["n"] else f"{text} (n = {len(values)})"
    return cell


def _solver_accuracy_cell(row: dict) -> str:
    """Accuracy % on the NFE images with the trained solver → with dopri5 at the loosest rtol (mean over seeds)."""
    if not row["ode"]:
        return "—"
    measured = row["solver_accuracy"]
    trained, solved = measured.get("trained", []), measured.get(max(NFE_RTOLS), [])
    if not (trained and solved):
        return "–"
    return f"{100 * statistics.mean(trained):.1f} → {100 * statistics.mean(solved):.1f}"


SOLVER_ACCURACY = f"accuracy %, {NFE_IMAGES} test images: trained RK4 → dopri5 (rtol {max(NFE_RTOLS):.0e})".replace(
    "e-0", "e-")


def _ratio(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else "–"


def accuracy_table(rows: list[dict]) -> str:
    """The accuracy table of one phase; NFE columns when it has ODE rows."""
    columns = {"depth": lambda r: DEPTH_TITLES[r["depth"]], "mixer": "mixer",
               "test accuracy % (mean ± sample std)": lambda r: _pm(*r["accuracy"]),
               "Δ vs SDPA (points)": lambda r: _pm(*r["vs_sdpa"]) if "vs_sdpa" in r else "—", "n": "n",
               "per seed": lambda r: ", ".join(f"{a:.2f}" for a in r["per_seed"]),
               "parameters": lambda r: f"{r['parameters']:,}", "train images/s": lambda r: rate(r["images_per_s"]),
               **{f"inference images/s, {res}²": infer_cell(res) for res in SPEED_RESOLUTIONS}}
    if any(r["ode"] for r in rows):
        columns |= {f"dopri5 NFE, rtol {rtol:.0e}".replace("e-0", "e-"): _nfe_cell(rtol) for rtol in NFE_RTOLS}
        columns[SOLVER_ACCURACY] = _solver_accuracy_cell
    return markdown_table(rows, columns, align="llrrrlrr" + "r" * (len(columns) - 8))


def beside_table(rows: list[dict]) -> str:
    """Accuracy beside inference speed, one line per (patch, depth, mixer), with the ratios to SDPA's speed."""
    columns = {"patch (grid)": lambda r: f"{r['patch']} ({OWN // r['patch']}×{OWN // r['patch']})", "epochs": "epochs",
               "depth": lambda r: DEPTH_TITLES[r["depth"]], "mixer": "mixer",
               "test accuracy % (mean ± sample std)": lambda r: _pm(*r["accuracy"]),
               "Δ vs SDPA (points)": lambda r: _pm(*r["vs_sdpa"]) if "vs_sdpa" in r else "—"}
    for res in SPEED_RESOLUTIONS:
        columns[f"images/s, {res}²"] = infer_cell(res)
        columns[f"× SDPA, {res}²"] = (lambda res: lambda r: _ratio(r.get("speed_vs_sdpa", {}).get(res))
                                      if r["mixer"] != "sdpa" else "—")(res)
    return markdown_table(rows, columns, align="lrllrr" + "r" * 2 * len(SPEED_RESOLUTIONS))


def _verdict(checks: list[bool | None]) -> str:
    """missed when any measured check fails, met when every check is measured and holds, else not yet measured."""
    if any(c is False for c in checks):
        return "missed"
    return "met" if checks and all(c is True for c in checks) else "not yet measured"


def _gap_text(row: dict | None) -> str:
    return _pm(*row["vs_sdpa"]) if row and "vs_sdpa" in row else "–"


def goal_rows(main_rows: list[dict], planned_seeds: int = 1, hosts: list[tuple[str, list[dict]]] | None = None
              ) -> list[dict]:
    """The issue's goals on the main table (patch 4) as rows {goal, mixer, accuracy, speed, verdict}: an SSoG
    mixer at least as accurate as SDPA (difference of means ≥ 0) in every depth form and faster than SDPA at
    HIGH² in every depth form on every CPU measured (any SSoG mixer meeting it meets the goal); fixed SSoG at
    most WITHIN_POINTS below SDPA in every depth form. `hosts`: (CPU, main rows with that CPU's speed) for each
    CPU; default: the speed already in `main_rows`, unnamed. While a row it reads has fewer than
    `planned_seeds` seeds, a met or missed verdict says "so far" and how many seeds it rests on."""
    out = _goal_rows(main_rows, hosts or [("", main_rows)])
    fewest = min((r["n"] for r in main_rows), default=0)
    if fewest < planned_seeds:
        for row in out:
            if row["verdict"] in ("met", "missed"):
                row["verdict"] += f" so far ({fewest} of {planned_seeds} seeds in the fewest-seeded cell)"
    return out


def _goal_rows(main_rows: list[dict], hosts: list[tuple[str, list[dict]]]) -> list[dict]:
    table = {(r["depth"], r["mixer"]): r for r in main_rows}
    out, first = [], []
    for mixer in SSOG_MIXERS:
        rows = [table.get((depth, mixer)) for depth in DEPTHS]
        checks = [r["vs_sdpa"][0] >= 0 if r and "vs_sdpa" in r else None for r in rows]
        speeds = []
        for host, host_rows in hosts:
            by_cell = {(r["depth"], r["mixer"]): r for r in host_rows}
            ratios = [by_cell.get((d, mixer), {}).get("speed_vs_sdpa", {}).get(HIGH) for d in DEPTHS]
            checks += [q > 1 if q is not None else None for q in ratios]
            speeds.append("; ".join(f"{DEPTH_TITLES[d]} {_ratio(q)}" for d, q in zip(DEPTHS, ratios, strict=True))
                          + (f" ({host})" if host else ""))
        verdict = _verdict(checks)
        first.append(verdict)
        out.append({"goal": f"≥ SDPA's accuracy in all three depth forms and faster at {HIGH}²", "mixer": mixer,
                    "accuracy": "; ".join(f"{DEPTH_TITLES[d]} {_gap_text(r)}"
                                          for d, r in zip(DEPTHS, rows, strict=True)),
                    "speed": " / ".join(speeds), "verdict": verdict})
    overall = "met" if "met" in first else "missed" if all(v == "missed" for v in first) else "not yet measured"
    out.append({"goal": "… by at least one SSoG configuration", "mixer": "ssog or ssog-steered", "accuracy": "",
                "speed": "", "verdict": overall})
    rows = [table.get((depth, "ssog")) for depth in DEPTHS]
    out.append({"goal": f"fixed SSoG within {WITHIN_POINTS:g} points of SDPA in every depth form", "mixer": "ssog",
                "accuracy": "; ".join(f"{DEPTH_TITLES[d]} {_gap_text(r)}" for d, r in zip(DEPTHS, rows, strict=True)),
                "speed": "",
                "verdict": _verdict([r["vs_sdpa"][0] >= -WITHIN_POINTS if r and "vs_sdpa" in r else None
                                     for r in rows])})
    return out


GOAL_COLUMNS = {"goal": "goal", "mixer": "mixer", "Δ accuracy vs SDPA, points (mean ± std)": "accuracy",
                f"inference speed ÷ SDPA's, {HIGH}²": "speed", "verdict": lambda r: f"**{r['verdict']}**"}


def tuning_section(root: Path, tuning: list[SweepRun], speed: dict[tuple, dict] | None = None) -> list[str]:
    """The tuning trials' validation accuracy (or failure) beside their models' inference speed (speed.csv): the
    speed–accuracy table the models' defaults are read from. One line when no trial has finished."""
    rows = []
    for run in tuning:
        summary = read_json(run_folder(root, run) / "summary.json")
        failure = read_json(run_folder(root, run) / "failed.json")
        if summary is not None or failure is not None:
            host = (read_json(run_folder(root, run) / "run.json") or {}).get("machine") or {}
            rows.append({**run.labels, "val": f"{100 * summary['val_accuracy']:.2f}" if summary else
                         f"failed (exit {failure['returncode']})", "machine": host.get("cpu_model", "not recorded"),
                         "infer": run_speed(run, speed)})
    if not rows:
        return ["No tuning trial has finished yet."]
    columns = {"mixer": "mixer", "trial": "trial",
               "hyper-parameters": lambda r: ", ".join(f"{k}={v}" for k, v in r.items()
                                                       if k not in ("mixer", "trial", "val", "machine", "infer")),
               "validation accuracy %": "val",
               **{f"inference images/s, {res}²": infer_cell(res) for res in SPEED_RESOLUTIONS},
               "trained on (run.json)": "machine"}
    unrecorded = sum(r["machine"] == "not recorded" for r in rows)
    note = (f" {unrecorded} trained before run.json recorded the machine (plan.md says on which host)."
            if unrecorded else "")
    return [f"{len(rows)} of {len(tuning)} trials finished.{note}", "",
            markdown_table(rows, columns, align="lrlr" + "r" * len(SPEED_RESOLUTIONS) + "l")]


# Validation runs that change one hyper-parameter of a tuned configuration (the sweep's VARIATIONS): phase ->
# (the varied key, its column title and format, section title, what the runs are).
VARIATION_SECTIONS = {
    "atom_lr": ("atom_lr_scale", "atom lr scale", lambda v: f"×{v:g}", "Atom learning rate",
                "Each SSoG mixer's tuned configuration with its atom parameters (μ, log σ, α) at another learning-rate "
                "scale"),
    "heads": ("ssog_heads", "steered heads", lambda v: f"{v:g}", "Steered head count",
              "Steered SSoG's tuned configuration with the nano preset's default head count, which the tuning's "
              "draw did not try"),
}


def variation_section(root: Path, tuning: list[SweepRun], finals: list[SweepRun], phase: str,
                      speed: dict[tuple, dict] | None = None) -> list[str]:
    """One VARIATION_SECTIONS phase: its runs beside the tuning trials that share everything but the varied key,
    with validation accuracy and inference speed. One line when none of its runs has finished."""
    key, title, fmt, _, what = VARIATION_SECTIONS[phase]

    def shared(run: SweepRun) -> dict:
        return {k: v for k, v in run.labels.items() if k not in ("trial", key, "depth", "patch", "seed")}

    varied = [r for r in finals if r.phase == phase]
    rows = []
    for mixer in SSOG_MIXERS:
        mine = [r for r in varied if r.labels["mixer"] == mixer]
        twins = [r for r in tuning if mine and shared(r) == shared(mine[0])]
        for run in sorted(twins + mine, key=lambda r: r.labels[key]):
            summary = read_json(run_folder(root, run) / "summary.json") or {}
            rows.append({**shared(run), "value": run.labels[key], "infer": run_speed(run, speed),
                         "source": f"tuning trial {run.labels['trial']}" if run.phase == "tune" else phase,
                         "val": f"{100 * summary['val_accuracy']:.2f}" if summary.get("val_accuracy") is not None
                         else "–"})
    if not any(r["source"] == phase and r["val"] != "–" for r in rows):
        return [f"No {phase} run has finished yet ({len(varied)} planned)."]
    columns = {"mixer": "mixer",
               "shared hyper-parameters": lambda r: ", ".join(f"{k}={v}" for k, v in r.items()
                                                             if k not in ("mixer", "value", "source", "val", "infer")),
               title: lambda r: fmt(r["value"]), "run": "source", "validation accuracy %": "val",
               **{f"inference images/s, {res}²": infer_cell(res) for res in SPEED_RESOLUTIONS}}
    return [f"{what}, everything else equal (the tuning trials with the same shared hyper-parameters beside it). One "
            "seed each: read differences under about 0.5 points as noise (the main table's seed-std).", "",
            markdown_table(rows, columns, align="llrlr" + "r" * len(SPEED_RESOLUTIONS))]


HORIZON_POINTS = 0.5  # a longer run gaining more than this (or than one seed-std of its main row) is not flat


def horizon_lines(root: Path, finals: list[SweepRun], main_rows: list[dict]) -> list[str]:
    """One sentence per finished horizon run: its test accuracy against the main run of the same mixer, depth
    and seed (half the epochs), and the verdict of plan.md's rule — the main recipe is budget-limited
    for that mixer when the longer run gains more than one seed-std of the main row or more than HORIZON_POINTS."""
    lines = []
    for run in (r for r in finals if r.phase == "horizon"):
        longer = read_json(run_folder(root, run) / "summary.json")
        twin = next((r for r in finals if r.phase == "main" and all(r.labels[k] == run.labels[k]
                                                                     for k in ("depth", "mixer", "seed"))), None)
        shorter = read_json(run_folder(root, twin) / "summary.json") if twin else None
        if not (longer and shorter):
            continue
        gain = 100 * (longer["test_accuracy"] - shorter["test_accuracy"])
        cell = run.labels["depth"], run.labels["mixer"]
        row = next((r for r in main_rows if (r["depth"], r["mixer"]) == cell), None)
        std = row["accuracy"][1] if row else math.nan
        limit = min(std, HORIZON_POINTS) if math.isfinite(std) else HORIZON_POINTS
        verdict = "budget-limited: the main recipe stops before this curve flattens" if gain > limit else "flat"
        spread = f"the main row's seed-std {std:.2f}" if math.isfinite(std) else "one main seed so far"
        lines.append(f"- {run.labels['mixer']} ({run.labels['depth']}, seed {run.labels['seed']}): "
                     f"{longer['epochs_done']} epochs {100 * longer['test_accuracy']:.2f}% against "
                     f"{shorter['epochs_done']} epochs {100 * shorter['test_accuracy']:.2f}%, {gain:+.2f} points "
                     f"({spread}; the rule's limit {limit:.2f}): **{verdict}**.")
    longer = {r.labels["mixer"]: read_json(run_folder(root, r) / "summary.json") for r in finals
              if r.phase == "horizon"}
    if (base := longer.get("sdpa")) and (gaps := [f"{m} {100 * (s['test_accuracy'] - base['test_accuracy']):+.2f}"
                                                  for m, s in longer.items() if s and m != "sdpa"]):
        lines.append(f"- At {base['epochs_done']} epochs, against SDPA (points, seed 0 only): {', '.join(gaps)}.")
    return lines


def context_lines(root: Path, finals: list[SweepRun]) -> list[str]:
    """Where the recipe is argued, each mixer's tuned hyper-parameters, one full command and the machines the
    finished final runs trained on (their run.json)."""
    tuned = {r.labels["mixer"]: {k: v for k, v in r.labels.items() if k not in ("mixer", "depth", "patch", "seed")}
             for r in finals if r.phase == "main"}
    machines: dict[str, int] = {}
    command = None
    for run in finals:
        if read_json(run_folder(root, run) / "summary.json") is None:
            continue
        record = read_json(run_folder(root, run) / "run.json") or {}
        host = (record.get("machine") or {}).get("cpu_model") or "not recorded"
        machines[host] = machines.get(host, 0) + 1
        if run.phase == "main" and command is None and record.get("command"):
            command = shlex.join(["python", *shlex.split(record["command"])[1:]])  # not this machine's interpreter
    lines = ["The plan, the recipe and how its length was judged: [plan.md](plan.md). Every run "
             "lives in `runs/<phase>/<depth>/<mixer>/s<seed>/`: `run.json` holds its exact command, "
             "commit and machine, `metrics.jsonl` its per-epoch curves, `summary.json` its result.", "",
             "- Tuned hyper-parameters (best validation accuracy, the tuning table below): " + "; ".join(
                 f"{m} " + ", ".join(f"{k}={v}" for k, v in hp.items()) for m, hp in tuned.items()) + "."]
    if machines:
        lines.append("- Trained on (finished final runs): " + ", ".join(f"{h} ({n})" for h, n in machines.items())
                     + "; one thread each, up to two runs at a time (runs/sweep.log has each start and end).")
    if command:
        lines += ["- A main run's command (the others differ in depth, mixer, hyper-parameters and seed):", "",
                  f"      {command}"]
    return lines


PHASES = (("main", "28², patch 4 (7×7 tokens)"), ("patch2", "28², patch 2 (14×14 tokens)"),
          ("horizon", "Horizon check: twice the epochs (28², patch 4, seed 0)"))


def speed_parts(root: Path, runs: list[SweepRun], speed_rows: list[dict], others: list[tuple[Path, list[dict]]]
                ) -> list[str]:
    """The sections "Accuracy beside inference speed" (one table per CPU measured) and "Inference throughput"
    (every measurement): `speed_rows` from speed.csv, `others` (file, rows) from the other CPUs' files."""
    def beside(rows: list[dict]) -> str:
        table = group_rows(root, runs, ("patch", "depth", "mixer"), speed_index(rows))
        return beside_table(table) if table else "No finished main or patch-2 runs yet."

    parts = ["## Accuracy beside inference speed", "",
             f"The trained nano models at their own resolution and at {HIGH}² (speed.csv, measured on "
             f"{host_of(speed_rows)}). ViT-Tiny's throughput and memory from 224² to 1024² are in `scaling_cpu.md` "
             "(the claims ledger reads them).", ""]
    parts += [beside(speed_rows), ""]
    for path, rows in others:
        parts += [f"The same models' inference speed measured on {host_of(rows)} ({path.name}):", "", beside(rows), ""]
    parts += ["## Inference throughput (speed.csv)", "", *speed_section(speed_rows), ""]
    for path, rows in others:
        parts += [f"On another CPU ({path.name}):", "", *speed_section(rows), ""]
    return parts


def report(root: Path, tuning: list[SweepRun], finals: list[SweepRun], speed_path: Path | None = None,
           other_speed_paths: tuple[Path, ...] = ()) -> str:
    """The whole report as markdown (see the module docstring). `other_speed_paths`: the same inference
    measurements made on other CPUs; the speed goal must hold on each of them too."""
    speed_rows = read_speed(speed_path) if speed_path is not None else []
    speed = speed_index(speed_rows)
    others = [(path, rows) for path in other_speed_paths if (rows := read_speed(path))]
    tables = {phase: group_rows(root, [r for r in finals if r.phase == phase], ("depth", "mixer"), speed)
              for phase, _ in PHASES}
    cells = [(r.labels["depth"], r.labels["mixer"]) for r in finals if r.phase == "main"]
    planned = max((cells.count(c) for c in set(cells)), default=1)  # seeds per main cell
    main_finals = [r for r in finals if r.phase == "main"]
    hosts = [(host_of(speed_rows), tables["main"])] + [
        (host_of(rows), group_rows(root, main_finals, ("depth", "mixer"), speed_index(rows))) for _, rows in others]
    parts = ["# Fashion-MNIST accuracy: mixers × depth forms (generated by scripts/fashion_sweep.py report)", "",
             "## Goals (computed from the tables below)", "",
             markdown_table(goal_rows(tables["main"], planned, hosts if others else None), GOAL_COLUMNS,
                            align="lllll"), ""]
    horizon = horizon_lines(root, finals, tables["main"])
    limited = [line.split(" (")[0].lstrip("- ") for line in horizon if "budget-limited" in line]
    if limited:
        parts += [f"**The main recipe is budget-limited** for {', '.join(limited)} (the horizon check below): these "
                  "tables and the goal verdicts above compare the mixers at the recipe's budget of epochs, not at "
                  "convergence; the horizon section gives the gaps to SDPA at twice the epochs (one seed).", ""]
    parts += ["## Setting", "", *context_lines(root, finals), ""]
    for phase, title in PHASES:
        total = sum(r.phase == phase for r in finals)
        epochs = "/".join(dict.fromkeys(r["epochs"] for r in tables[phase]))  # the recipe's, from the summaries
        parts += [f"## {title}" + (f", {epochs} epochs" if epochs else ""), ""]
        parts += [accuracy_table(tables[phase])] if tables[phase] else [
            f"No finished {phase} runs yet ({total} runs planned)." if total else
            f"No {phase} runs yet: they start once every tuning trial has finished."]
        if phase == "horizon":
            parts += ["", *horizon]
        parts.append("")
    parts += ["Cells: – not measured yet (no nfe.json or speed.csv row); — does not apply. NFE: dopri5 (torchdiffeq, "
              f"atol = rtol) on the first {NFE_IMAGES} test images in one batch, after training (nfe.json). "
              "Train images/s: the train CLI's own rate with other runs beside it on the same cores, so only "
              "indicative; the inference columns are measured alone (speed.csv).", "",
              "How to read the NFE: the ODE models were trained through one fixed RK4 step over [0, 4], so what "
              "they learned is that step's map, not a solution of dx/dt = f(x). Solved accurately by dopri5, the "
              f"same vector field gives other features, and accuracy falls (column \"{SOLVER_ACCURACY}\"). The NFE "
              "therefore measures how hard each trained vector field is to integrate, not the cost of the model as "
              "trained; a claim about adaptive solves needs models trained with the adaptive solver.", ""]
    parts += speed_parts(root, [r for r in finals if r.phase in ("main", "patch2")], speed_rows, others)
    parts += ["## Tuning (validation split, discrete, seed 0)", "", *tuning_section(root, tuning, speed), ""]
    for phase, (*_, heading, _) in VARIATION_SECTIONS.items():
        parts += [f"## {heading} (validation split, discrete, seed 0)", "",
                  *variation_section(root, tuning, finals, phase, speed), ""]
    return "\n".join(parts)
