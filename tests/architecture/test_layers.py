"""The floors of the house (docs/ARCHITECTURE.md), held against every import.

Every `import` and `from ... import` of the project's own modules counts,
also those inside functions, and so does every module loaded by name
through importlib: each such call site must be declared in DYNAMIC with
the modules it may load, so that nothing escapes the contract. A module
may import its own package, the packages on lower floors, and nothing
above; no set of modules may import each other in a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Top-level packages, from the top floor down. Packages on one floor never
# import each other.
FLOORS = [
    ("benchmarks", "vagrant"),
    ("harness",),
    ("reports",),
    ("checkers", "workloads"),
    ("nemesis",),
    ("ground",),
]
# Inside harness/, the same rule one level down: the CLI wires commands, the
# controller runs them on a lab, the lab composes a backend and a system, and
# both stand on the node machinery. Files on one floor never import each other.
HARNESS_FLOORS = [
    ("harness.cli",),
    ("harness.controller",),
    ("harness.lab",),
    ("harness.registry",),
    ("harness.backends", "harness.systems"),
    ("harness.node",),
    ("harness.netfaults", "harness.powerfs", "harness.wire_relay", "harness.wire_nodes"),
    ("harness.nfqueue_netem", "harness.wire"),
]

# Call sites that load modules by name, and the modules each may load (a
# trailing ".*" stands for every module of that package).
DYNAMIC = {
    "harness.cli": ["harness.controller.*", "checkers.cli", "reports.cli"],
    "harness.registry": ["harness.backends.*", "harness.systems.*"],
    "harness.controller.run": ["workloads.*"],
    "workloads.client": ["workloads.*"],
    "checkers.cli": ["checkers.*"],
    "nemesis.heal": ["nemesis.*"],  # each fault kind's module, as ground/faults.py names it
}
PACKAGES = {name for floor in FLOORS for name in floor}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


MODULES = project_modules()


def resolve(name: str) -> str | None:
    """The project module an imported name lands in (a name inside a module counts as the module)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported project module, line) for every import statement in the file, at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{alias.name}" for alias in node.names] or [prefix]
        for name in names:
            target = resolve(name)
            if target and target != module:
                found.append((target, node.lineno))
    return found


def dynamic_calls(path: Path) -> list[int]:
    """Lines that load a module by name (importlib.import_module, __import__)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                lines.append(node.lineno)
    return lines


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module, path in MODULES.items():
        graph[module].update(target for target, _line in imports_of(module, path))
    for module, patterns in DYNAMIC.items():
        for pattern in patterns:
            regex = re.compile("^" + re.escape(pattern).replace(r"\.\*", r"\..+") + "$")
            graph[module].update(name for name in MODULES if regex.match(name) and name != module)
    return graph


def floor_of(module: str, floors) -> int | None:
    for index, floor in enumerate(floors):
        for name in floor:
            if module == name or module.startswith(name + "."):
                return index
    return None


def upward(source: str, target: str) -> str | None:
    """Why source may not import target, or None when it may."""
    for floors in (FLOORS, HARNESS_FLOORS):
        a, b = floor_of(source, floors), floor_of(target, floors)
        if a is None or b is None:
            continue
        owner_a = next(n for n in floors[a] if source == n or source.startswith(n + "."))
        owner_b = next(n for n in floors[b] if target == n or target.startswith(n + "."))
        if owner_a == owner_b:
            continue  # inside one package (or one sub-package of harness): its own business
        if b < a:
            return f"{source} (floor {owner_a}) imports {target}, on a floor above it ({owner_b})"
        if a == b:
            return f"{source} ({owner_a}) imports {target} ({owner_b}), which stands on the same floor"
    return None


def test_every_module_is_on_a_floor():
    harness_modules = [m for m in MODULES if m.startswith("harness.")]
    unplaced = [m for m in harness_modules if floor_of(m, HARNESS_FLOORS) is None]
    assert unplaced == [], f"harness modules on no floor of HARNESS_FLOORS: {unplaced}"


def test_no_module_imports_from_a_floor_above_its_own():
    wrong = []
    for module, path in sorted(MODULES.items()):
        for target, line in imports_of(module, path):
            why = upward(module, target)
            if why:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    for module, targets in sorted(edges().items()):
        if module in DYNAMIC:
            for target in sorted(targets):
                why = upward(module, target)
                if why:
                    wrong.append(f"{module} (loaded by name): {why}")
    assert wrong == [], "\n".join(wrong)


def test_every_load_by_name_is_declared():
    undeclared = [
        f"{path.relative_to(ROOT)}:{line}"
        for module, path in sorted(MODULES.items())
        for line in dynamic_calls(path)
        if module not in DYNAMIC
    ]
    assert undeclared == [], f"modules loaded by name outside DYNAMIC: {undeclared}"
    stale = [module for module in DYNAMIC if module not in MODULES or not dynamic_calls(MODULES[module])]
    assert stale == [], f"DYNAMIC declares call sites that load nothing by name: {stale}"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_circle():
    static = {module: {t for t, _line in imports_of(module, path)} for module, path in MODULES.items()}
    found = circles(static)
    assert found == [], "modules that import each other in a circle:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_contract_catches_an_upward_import_and_a_circle():
    # the checks themselves can fail: a made-up upward edge and a made-up circle
    assert upward("ground.errors", "harness.lab") is not None
    assert upward("nemesis.faults", "workloads.client") is not None
    assert upward("harness.lab", "harness.controller.run") is not None
    assert upward("harness.backends.local", "harness.systems.wire") is not None
    assert upward("harness.controller.run", "workloads.client_pool") is None
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
