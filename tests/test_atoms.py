"""ops.random_atoms: the shapes ops.ssog takes, the documented distribution, reproducibility, clear errors."""

import pytest
import torch

from ssog_lab import ops
from ssog_lab.ops import atoms


def test_fixed_and_steered_shapes_are_accepted_by_ssog():
    v = torch.randn(2, 3, 20, 4)  # (B, heads, N, d) on a 4×5 grid
    for steered in (False, True):
        mu, sigma, amp = ops.random_atoms(3, 2, (4, 5), batch=2, steered=steered, dtype=torch.float64)
        lead = (2, 3, 20, 2) if steered else (3, 2)
        assert mu.shape == sigma.shape == (*lead, 2) and amp.shape == lead and mu.dtype == torch.float64
        assert ops.ssog(v.double(), mu, sigma, amp, (4, 5), backend="torch").shape == v.shape


def test_distribution_matches_its_documentation():
    mu, sigma, amp = ops.random_atoms(64, 64, (8, 8), generator=torch.Generator().manual_seed(0))
    low, high = atoms.SIGMA_RANGE
    assert low <= float(sigma.min()) and float(sigma.max()) <= high
    assert float(sigma.mean()) == pytest.approx((low + high) / 2, abs=0.05)
    assert float(mu.std()) == pytest.approx(atoms.MU_STD, rel=0.05) and float(amp.std()) == pytest.approx(1, rel=0.05)


def test_same_generator_seed_same_atoms():
    first, second = (ops.random_atoms(2, 3, (4, 4), generator=torch.Generator().manual_seed(7)) for _ in range(2))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize("kwargs, name", [(dict(heads=0), "heads"), (dict(atoms=1.5), "atoms"),
                                          (dict(grid=(4, 0)), "grid"), (dict(steered=True), "batch")])
def test_bad_arguments_name_themselves(kwargs, name):
    args = dict(heads=2, atoms=3, grid=(4, 4)) | kwargs
    with pytest.raises(ValueError, match=name):
        ops.random_atoms(args.pop("heads"), args.pop("atoms"), args.pop("grid"), **args)
