"""No two netsched modules import each other, directly or round a longer circle. Every import counts,
also one inside a function or under TYPE_CHECKING: a circle kept working by a late import still means
that neither module can be read, moved or tested without the other."""

from __future__ import annotations

import grimp


def import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The circles of `imports` (module -> the modules it imports): each strongly connected component
    of more than one module, sorted (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, todo = work[-1]
            nxt = next((m for m in todo if m not in index or m in on_stack), None)
            if nxt is not None:
                if nxt in index:
                    low[module] = min(low[module], index[nxt])
                else:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(imports.get(nxt, ())))))
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_cycle_finder_finds_a_circle_and_only_it():
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert import_cycles(imports) == [["a", "b", "c"]]


def test_no_netsched_modules_import_each_other():
    graph = grimp.build_graph("netsched")
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    cycles = import_cycles(imports)
    assert not cycles, "modules importing each other, round a circle: " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles)
