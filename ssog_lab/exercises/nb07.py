"""Exercises of notebook 07 (registered with `@exercise`; see the package docstring)."""

from __future__ import annotations

from ._registry import close, exercise, same_set


@exercise("07.tokens", judge=close(0.0), wrong=64,
          hint="a token is one patch, and a patch covers 16 × 16 pixels.",
          explain="64 × 64 = 4,096 tokens, the token count of the paper's 1024² claims.")
def tokens() -> int:
    return (1024 // 16) ** 2


def _mixing_ratio(resolution: int, patch: int = 16, atoms: int = 4) -> float:
    n = (resolution // patch) ** 2
    return (2 * n ** 2) / (2 * atoms * n ** 1.5)


@exercise("07.gap_growth", judge=close(0.01), wrong=4.0,
          hint="write both mixers' multiply-adds per layer as powers of N (the cost formulas), take their ratio, "
               "and ask how it depends on the side of the token grid.",
          explain="the ratio is √N / M = (R / S) / M, S the patch side: linear in the resolution R.")
def gap_growth() -> float:
    return _mixing_ratio(1024) / _mixing_ratio(512)


@exercise("07.ode_ratio", judge=close(0.01), wrong=96.0,
          hint="what decides how many times a fixed-grid solver evaluates f: the mixer inside f, or the solver's "
               "settings?",
          explain="the NFE cancels: a fixed-grid ODE model is exactly as much faster as one evaluation of f is.")
def ode_ratio() -> float:
    nfe, sdpa_ms, ssog_ms = 96, 3.0, 1.0  # the default RK4, 24 steps; one evaluation 3× faster with SSoG
    return (nfe * sdpa_ms) / (nfe * ssog_ms)


@exercise("07.memory_baseline", judge=same_set, wrong={"a", "b"},
          hint="the ledger has one peak-memory row per baseline for fixed SSoG in the ODE form; read its verdicts.",
          explain="the baseline that stores the N×N scores (sdpa-math) has the most to lose against SSoG, which never "
                  "builds them; the fused kernel holds no N×N matrix either, so against it there is far less to save.")
def memory_baseline() -> set[str]:
    from ..results.ledger import claims_ledger

    letters = {"sdpa-math": "a", "sdpa (PyTorch": "b"}
    met = set()
    for row in claims_ledger():
        if row["variant"] == "fixed" and row["claim"].startswith("ode: peak memory") and row["verdict"] == "met":
            met |= {letter for key, letter in letters.items() if key in row["claim"]}
    return met


def _small_grid_explain(ratio: float) -> str:
    """What the computed ratio says, in words that follow the stored data (a 10% band counts as level: neighbouring
    processes on a shared CPU vary by about that much)."""
    where = "ahead of" if ratio > 1.1 else "behind" if ratio < 1 / 1.1 else "level with (within 10% of)"
    return (f"on the stored run fixed SSoG is {where} the fastest SDPA at 196 tokens. There attention's N² term is "
            "only about half its projections (N / 2C), so the ratio is set by the projections SSoG does without "
            "(Q, K), the MLP both share and each kernel's constants on that CPU, not yet by N² against N^1.5.")


@exercise("07.small_grid", judge=close(0.02), wrong=3.39,
          hint="filter bench.ratio_table(rows) of the stored CPU run on depth 'discrete', mixer 'ssog' and the "
               "smallest resolution (224²).",
          explain=_small_grid_explain)
def small_grid() -> float:
    from .. import bench
    from ..repository import RESULTS_DIR

    rows = bench.load_csv(RESULTS_DIR / "scaling_cpu" / "bench.csv")
    return next(r["speed_vs_fastest_sdpa"] for r in bench.ratio_table(rows)
                if r["depth"] == "discrete" and r["mixer"] == "ssog" and r["resolution"] == 224)

