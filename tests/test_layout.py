"""The package's layout rules: the core stays free of CLI and plotting code, no module imports itself through
others, one mixer list with a colour each, the names notebook 08 reads exist, and functions stay short (package
and scripts/). Files follow the one-concern-per-file rule of docs/DESIGN.md §5, a review rule, not a count."""

import ast
import json
import re
from pathlib import Path

from ssog_lab import bench, models, style, viz

PACKAGE = Path(__file__).resolve().parents[1] / "ssog_lab"
SCRIPTS = PACKAGE.parent / "scripts"  # the scripts follow the package's length rules too
CORE = ["ops", "layers.py", "models.py", "ode.py", "ode_cost.py", "lipschitz.py", "learned.py", "data.py",
        "image_dataset.py", "image_folder.py", "bounded.py"]
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


def test_results_experiments_and_exercises_draw_nothing():
    """Results, experiments and the exercise engine compute; only viz (and the benchmark's figure) draws."""
    for path in _modules("results", "experiments", "exercises"):
        assert not _imported(ast.parse(path.read_text())) & {"plotly", "ipywidgets"}, path


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_imports(path: Path, modules: set[str]) -> set[str]:
    """The ssog_lab modules `path` imports anywhere in its code (deferred imports in functions count too)."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module
            for alias in node.names:  # `from package import module` imports the module
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
    return (found & modules) - {name}


def test_no_import_cycle_in_the_package():
    """Tarjan's strongly connected components of the import graph: each must be one module."""
    paths = {_module_name(p): p for p in _modules(".")}
    graph = {name: _package_imports(path, set(paths)) for name, path in paths.items()}
    index, low, stack, cycles = {}, {}, [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert graph["ssog_lab.data"] >= {"ssog_lab.image_dataset", "ssog_lab.image_folder"}  # the graph sees imports
    assert cycles == []


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


def test_functions_stay_short():
    for path in [*_modules("."), *sorted(SCRIPTS.glob("*.py"))]:
        text, name = path.read_text(), path.relative_to(PACKAGE.parent).as_posix()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_kernel(node):
                assert node.end_lineno - node.lineno < 60, f"{name}: {node.name}"
