"""The subnormal census: counts match the definition, the explicit attention probabilities are the ones the
mixers apply, and a planted subnormal activation is found under its module's name. The flush comparison script
pairs operator times with flushing off and on."""

import pytest
import torch

from ssog_lab.bench.report import write_csv
from ssog_lab.bench.subnormals import attention_probabilities, census_markdown, count_subnormal, subnormal_census
from ssog_lab.layers import AxialSDPAMixer, SDPAMixer, _merge_heads
from ssog_lab.models import build_model


def test_count_subnormal_follows_the_definition():
    tiny = torch.finfo(torch.float32).tiny
    t = torch.tensor([0.0, tiny, tiny / 2, -tiny / 4, 1.0, -0.0])
    assert count_subnormal(t) == 2
    assert count_subnormal(t.double()) == 0  # normal numbers in float64
    assert count_subnormal(torch.arange(4)) == 0


def test_attention_probabilities_are_what_the_mixers_apply():
    torch.manual_seed(0)
    grid = (3, 5)
    x = torch.randn(2, 15, 8, dtype=torch.float64)
    dense = SDPAMixer(8, 2).double()
    (p,) = attention_probabilities(dense, x, grid)  # (B, heads, N, N)
    _, _, v = dense._project(x)
    torch.testing.assert_close(dense.proj(_merge_heads(p @ v)), dense(x, grid))
    axial = AxialSDPAMixer(8, 2).double()
    p_col, p_row = attention_probabilities(axial, x, grid)  # (B, heads·H, W, W), (B, heads·W, H, H)
    _, _, v = axial._project(x)  # (B, heads, N, d)
    b, heads, n, d = v.shape
    z = (p_col @ v.reshape(b, heads * 3, 5, d)).reshape(b, heads, 3, 5, d)  # stage 1 along each row
    y = p_row @ z.transpose(2, 3).reshape(b, heads * 5, 3, d)  # stage 2 along each column
    y = y.reshape(b, heads, 5, 3, d).transpose(2, 3).reshape(b, heads, n, d)
    torch.testing.assert_close(axial.proj(_merge_heads(y)), axial(x, grid))
    one = torch.ones((), dtype=torch.float64)
    assert torch.allclose(p_col.sum(-1), one) and torch.allclose(p_row.sum(-1), one)


def test_census_finds_a_planted_subnormal_layernorm_output():
    torch.manual_seed(0)
    model = build_model("nano", "discrete", "sdpa", image_size=16, patch_size=4).eval()
    images = torch.randn(2, 3, 16, 16)
    rows = {r["tensor"]: r for r in subnormal_census(model, images)}
    assert {"LayerNorm", "GELU", "Linear", "SDPAMixer", "softmax (inside SDPA)"} <= set(rows)
    assert rows["LayerNorm"]["subnormal"] == 0
    assert rows["softmax (inside SDPA)"]["entries"] == 2 * model.config.heads * 16 * 16 * model.config.layers
    norm = model.blocks[0].norm
    with torch.no_grad():
        norm.weight.zero_()
        norm.bias.fill_(1e-39)  # every output of this LayerNorm is subnormal in float32
    rows = {r["tensor"]: r for r in subnormal_census(model, images)}
    assert rows["LayerNorm"]["subnormal"] >= 2 * 16 * model.config.dim
    assert "| LayerNorm |" in census_markdown(list(rows.values()))


def test_flush_compare_pairs_rows_and_reports_the_ratio_range(tmp_path, load_script):
    """scripts/flush_compare.py: times of the same (grid, op) side by side, on ÷ off over every time, and a clear
    exit when a folder of the pair was not measured the way its place in the pair says."""
    compare = load_script("flush_compare")

    def measured(folder, flushed, scale):
        rows = [{"grid": f"{s}×{s}", "tokens": s * s, "op": op, "forward_ms": scale * s, "forward_backward_ms": 3 * s,
                 "heads": 4, "head_dim": 48, "flush_denormal": flushed}
                for s in (8, 32, 64) for op in ("sdpa", "ssog fixed separable")]
        write_csv(rows, folder / "operator.csv")
        return folder

    off, on = measured(tmp_path / "off", False, 1.0), measured(tmp_path / "on", True, 2.0)
    text = compare.report([(off, on)])
    assert "| 4 heads × 48 | 64×64 | sdpa | 64.0 / 128.0 | 192.0 / 192.0 |" in text
    assert "8×8" not in text.split("\n\n")[0]  # only the two largest grids in the table
    assert "over all 12 times" in text and "1.00 to 2.00" in text
    with pytest.raises(SystemExit, match="flush_denormal"):
        compare.report([(on, off)])
