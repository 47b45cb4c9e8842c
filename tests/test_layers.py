"""The house: every import in the package points down a floor, and no modules import each other in a circle.

The graph is read with ``ast`` from the source (module-level and function-level imports, ``TYPE_CHECKING`` blocks
included: a type-only circle is still a circle in the design). It covers the Python packages under ``msmigrate/``;
folders without ``__init__.py`` are files shipped as data or run by another interpreter (the stand-in target's
tree, the fixtures' custom model code, the runtime probes), never imported by msmigrate. Imports built from strings
(``importlib.import_module``) are not seen.

To add a top-level room, declare its floor in ``FLOORS``: an undeclared room fails the test."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import msmigrate

# A room may import only rooms on a lower floor (and itself). "" is the package's own ``__init__``.
FLOORS = {
    "": 0,
    "core": 0,
    "testbeds": 1,
    "tools": 1,
    "knowledge": 1,
    "prompts": 2,
    "agent": 3,
    "faces": 4,
}


def package_modules(pkg_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is_package) for every module reachable through packages from ``pkg_dir``."""
    name = pkg_dir.name
    found: dict[str, tuple[Path, bool]] = {}

    def walk(folder: Path, dotted: str) -> None:
        found[dotted] = (folder / "__init__.py", True)
        for child in sorted(folder.iterdir()):
            if child.is_dir() and (child / "__init__.py").is_file():
                walk(child, f"{dotted}.{child.name}")
            elif child.suffix == ".py" and child.name != "__init__.py":
                found[f"{dotted}.{child.stem}"] = (child, False)

    walk(pkg_dir, name)
    return found


def _known(dotted: str, modules: dict) -> str | None:
    """The longest prefix of ``dotted`` that is a module of the package (``a.b.name`` -> ``a.b``)."""
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def import_graph(pkg_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. ``from X import n`` counts as an import of ``X.n`` when that is a
    module (a submodule import), else of ``X``."""
    modules = package_modules(pkg_dir)
    root = pkg_dir.name
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, (path, is_pkg) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        here = mod.split(".") if is_pkg else mod.split(".")[:-1]  # the package relative imports start from
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            for target in targets:
                if target == root or target.startswith(root + "."):
                    known = _known(target, modules)
                    if known and known != mod:
                        graph[mod].add(known)
    return graph


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Every import into a room on the same or a higher floor, and every module in an undeclared room."""
    problems = []
    for mod in sorted(graph):
        room = room_of(mod)
        if room not in floors:
            problems.append(f"{mod}: room {room!r} has no declared floor")
            continue
        for dep in sorted(graph[mod]):
            other = room_of(dep)
            if other != room and other in floors and floors[other] >= floors[room]:
                problems.append(f"{mod} (floor {floors[room]}) imports {dep} (floor {floors[other]})")
    return problems


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


PKG_DIR = Path(msmigrate.__file__).resolve().parent


def test_every_import_points_down():
    problems = layer_violations(import_graph(PKG_DIR), FLOORS)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_no_import_circles():
    circles = import_circles(import_graph(PKG_DIR))
    assert not circles, "import circles:\n" + "\n".join(" ⇄ ".join(c) for c in circles)


def test_the_graph_sees_the_package():
    # Guards against a checker that passes because it reads nothing: the known downward arrows must be there.
    graph = import_graph(PKG_DIR)
    assert "msmigrate.core.tool_result" in graph["msmigrate.knowledge.retrieval"]
    assert "msmigrate.tools.module_plan" in graph["msmigrate.tools.target_check_tools"]
    assert "msmigrate.agent.runner" in graph["msmigrate.faces.run_hook"] | graph["msmigrate.faces.chat.driver"]
    assert {room_of(m) for m in graph} == set(FLOORS)


# The two migration routes are rooms inside ``agent``: neither imports the other, and what they share (every module
# outside the routes that a route imports) imports no route — it sits below them. Only the places that pick a route
# (the runner's gate table, the rules policy, the plan node, the report) import the routes.
ROUTES = ("msmigrate.agent.routes.fsdp2", "msmigrate.agent.routes.megatron")


def route_of(module: str, routes: tuple[str, ...] = ROUTES) -> str | None:
    return next((r for r in routes if module == r or module.startswith(r + ".")), None)


def route_violations(graph: dict[str, set[str]], routes: tuple[str, ...] = ROUTES) -> list[str]:
    problems = []
    shared = set()
    for mod in sorted(graph):
        mine = route_of(mod, routes)
        if mine is None:
            continue
        for dep in sorted(graph[mod]):
            other = route_of(dep, routes)
            if other is None:
                shared.add(dep)
            elif other != mine:
                problems.append(f"{mod} (route {mine}) imports {dep} (route {other})")
    for mod in sorted(shared):
        for dep in sorted(graph.get(mod, ())):
            if route_of(dep, routes):
                problems.append(f"{mod} (shared by the routes) imports {dep}")
    return problems


def test_the_routes_are_two_rooms_over_what_they_share():
    graph = import_graph(PKG_DIR)
    assert not route_violations(graph), "\n".join(route_violations(graph))
    for route in ROUTES:  # the rooms exist and hold the route's gates and rules phases
        assert {f"{route}.gates", f"{route}.rules.model", f"{route}.rules.data", f"{route}.rules.config"} <= set(graph)
    assert "msmigrate.agent.gates.evidence" in graph["msmigrate.agent.routes.megatron.gates.slots"]


def probe_graph(folder: Path) -> dict[str, set[str]]:
    """The runtime probes of one folder (scripts run by the target's interpreter with their folder on sys.path): probe
    -> the sibling probes it imports by their bare names."""
    stems = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            deps |= {n.split(".")[0] for n in names if n.split(".")[0] in stems}
        graph[path.stem] = deps - {path.stem}
    return graph


PROBE_FOLDERS = [PKG_DIR / "tools" / "probes", PKG_DIR / "tools" / "megatron" / "probes"]


@pytest.mark.parametrize("folder", PROBE_FOLDERS, ids=lambda f: str(f.relative_to(PKG_DIR)))
def test_no_import_circles_among_the_probes(folder):
    graph = probe_graph(folder)
    assert len(graph) > 3 and any(graph.values())  # it read the folder's probes and their sibling imports
    circles = import_circles(graph)
    assert not circles, "probe import circles:\n" + "\n".join(" ⇄ ".join(c) for c in circles)


def test_route_checker_catches_a_crossing_and_a_shared_module_reaching_up():
    graph = {"p.r.a.x": {"p.shared"}, "p.r.b.y": {"p.r.a.x"}, "p.shared": set(), "p.pick": {"p.r.a.x"}}
    assert route_violations(graph, ("p.r.a", "p.r.b")) == ["p.r.b.y (route p.r.b) imports p.r.a.x (route p.r.a)"]
    graph["p.shared"] = {"p.r.b.y"}
    assert "p.shared (shared by the routes) imports p.r.b.y" in route_violations(graph, ("p.r.a", "p.r.b"))


def test_probe_checker_catches_a_circle(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from b import g\n")
    (tmp_path / "b.py").write_text("import a\nimport json\n")
    assert import_circles(probe_graph(tmp_path)) == [["a", "b"]]


# --- the checker itself, on a small package written here ---------------------------------------------------------

def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "toy"


TOY_FLOORS = {"": 0, "base": 0, "mid": 1, "top": 2}
CLEAN = {
    "toy/__init__.py": "",
    "toy/base/__init__.py": "",
    "toy/base/result.py": "X = 1\n",
    "toy/mid/__init__.py": "from toy.mid.a import A\n",
    "toy/mid/a.py": "from toy.base.result import X\nfrom toy.mid import b\nA = X\n",
    "toy/mid/b.py": "from ..base import result\n",
    "toy/top/__init__.py": "",
    "toy/top/face.py": "import toy.mid.a\n\ndef run():\n    from toy.base.result import X\n    return X\n",
    "toy/data/not_a_package.py": "import toy.top.face\n",  # shipped as data: no __init__.py above it
}


def test_checker_passes_a_clean_package(tmp_path):
    graph = import_graph(_write(tmp_path, CLEAN))
    assert graph["toy.mid.a"] == {"toy.base.result", "toy.mid.b"}
    assert graph["toy.mid.b"] == {"toy.base.result"}  # relative import resolved
    assert graph["toy.top.face"] == {"toy.mid.a", "toy.base.result"}  # function-level import seen
    assert "toy.data.not_a_package" not in graph
    assert layer_violations(graph, TOY_FLOORS) == []
    assert import_circles(graph) == []


@pytest.mark.parametrize("rel, text", [
    ("toy/mid/b.py", "from toy.top.face import run\n"),  # module-level, up two floors
    ("toy/mid/b.py", "def f():\n    import toy.top.face\n"),  # function-level
    ("toy/mid/b.py", "from ..top import face\n"),  # relative
    ("toy/base/result.py", "from toy.mid.a import A\nX = 1\n"),  # base reaching into the middle
    ("toy/mid/b.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.top import face\n"),
])
def test_checker_catches_an_upward_import(tmp_path, rel, text):
    graph = import_graph(_write(tmp_path, {**CLEAN, rel: text}))
    problems = layer_violations(graph, TOY_FLOORS)
    assert len(problems) == 1 and "imports toy." in problems[0], problems


def test_checker_catches_a_same_floor_import_between_rooms(tmp_path):
    files = {**CLEAN, "toy/side/__init__.py": "", "toy/side/s.py": "", "toy/mid/b.py": "import toy.side.s\n"}
    problems = layer_violations(import_graph(_write(tmp_path, files)), {**TOY_FLOORS, "side": 1})
    assert problems == ["toy.mid.b (floor 1) imports toy.side.s (floor 1)"]


def test_checker_catches_an_undeclared_room(tmp_path):
    files = {**CLEAN, "toy/attic/__init__.py": "", "toy/attic/old.py": ""}
    problems = layer_violations(import_graph(_write(tmp_path, files)), TOY_FLOORS)
    assert problems == ["toy.attic: room 'attic' has no declared floor", "toy.attic.old: room 'attic' has no declared floor"]


def test_checker_catches_a_circle(tmp_path):
    # a -> b at module level, b -> a inside a function: the kind that only breaks at call time.
    files = {**CLEAN, "toy/mid/b.py": "def later():\n    from toy.mid.a import A\n    return A\n"}
    assert import_circles(import_graph(_write(tmp_path, files))) == [["toy.mid.a", "toy.mid.b"]]


def test_checker_catches_a_longer_circle(tmp_path):
    files = {**CLEAN, "toy/mid/b.py": "import toy.mid.c\n", "toy/mid/c.py": "from toy.mid.a import A\n"}
    assert import_circles(import_graph(_write(tmp_path, files))) == [["toy.mid.a", "toy.mid.b", "toy.mid.c"]]
