"""The package's layout rules: the core stays free of CLI and plotting code, one mixer list with a colour
each, the names notebook 08 reads exist, and functions and files stay short (package and scripts/)."""

import ast
import json
import re
from pathlib import Path

from ssog_lab import bench, models, style, viz

PACKAGE = Path(__file__).resolve().parents[1] / "ssog_lab"
SCRIPTS = PACKAGE.parent / "scripts"  # the scripts follow the package's length rules too
CORE = ["ops", "layers.py", "models.py", "ode.py", "lipschitz.py", "data.py", "bounded.py"]
# Exception: the Triton kernels (functions decorated with triton.jit: a kernel is read as one unit, as in Triton's
# tutorials) may be longer than 60 lines.


def _is_kernel(node: ast.FunctionDef) -> bool:
    return any("triton.jit" in ast.unparse(d) for d in node.decorator_list)


def _modules(*names: str):
    for name in names:
        path = PACKAGE / name
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_imports_no_cli_or_plotting():
    for path in _modules(*CORE):
        assert not _imported(ast.parse(path.read_text())) & {"argparse", "plotly", "ipywidgets"}, path


def test_one_mixer_list_and_every_mixer_has_a_colour():
    assert bench.MIXERS is models.MIXERS and bench.DEPTHS is models.DEPTHS
    assert set(models.MIXERS) <= set(style.MIXER_COLOURS)
    assert style.mixer_colour("a-new-mixer")  # a mixer without a colour still draws


def test_every_name_notebook_08_reads_exists():
    from ssog_lab.ops import triton_kernel

    cells = json.loads((PACKAGE.parent / "notebooks" / "08_appendix_triton_kernel.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert all(hasattr(viz, name) for name in re.findall(r"\bviz\.(\w+)", code))
    assert set(re.findall(r"show_source\(\"(\w+)\"\)", code)) <= set(viz.KERNEL_PARTS)
    assert all(hasattr(triton_kernel, name) for name in viz.KERNEL_PARTS)


def test_functions_and_files_stay_short():
    for path in [*_modules("."), *sorted(SCRIPTS.glob("*.py"))]:
        text, name = path.read_text(), path.relative_to(PACKAGE.parent).as_posix()
        assert len(text.splitlines()) <= 450, name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_kernel(node):
                assert node.end_lineno - node.lineno < 60, f"{name}: {node.name}"
