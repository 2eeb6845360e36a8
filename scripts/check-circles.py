#!/usr/bin/env python3
"""Fails when the files of any crate import each other in a circle.

Each `.rs` file under `crates/*/src` is a node; an edge goes from a file to the file that
defines each `crate::…`, `super::…` or `self::…` path it names (in `use` items and inline
paths alike, and bare paths through a module the file declares), through the `pub use`
re-exports of `lib.rs` and `mod.rs` files. A module reaching into its own submodules is
the module tree, not an import, and is no edge; a submodule reaching its parent (`use
super::*` in `tests.rs`) or a sibling is. Every circle found is printed as the files
that form it, and the exit status is 1; `--edges` prints the edges inside each circle,
`--self-test` checks the check on a made-up crate.

Written by hand: the crate that draws Rust module graphs (cargo-modules) builds
rust-analyzer and takes longer to compile on a CI machine than the whole test suite's
build, and a file-level view is all this check needs.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Comments, strings and character literals, in one pass so that neither hides the other
# (a `//` inside a string, a quote inside a comment).
NOISE = re.compile(
    r"//[^\n]*"  # line comment
    r"|/\*.*?\*/"  # block comment
    r"|\br(#*)\".*?\"\1"  # raw string
    r"|b?\"(?:\\.|[^\"\\])*\""  # string
    r"|b?'(?:\\.|[^\\'\n])'",  # character
    re.S,
)
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE = re.compile(r"\buse\s+([^;]*);")
CHILD_MOD = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*[;{]")
REEXPORT = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([A-Za-z_][A-Za-z0-9_:]*?)::(\{[^;]*\}|[A-Za-z_][A-Za-z0-9_]*);", re.S)


def strip(text):
    return NOISE.sub(lambda m: '""' if m.group(0).endswith(('"', "'")) else " ", text)


def module_of(src, path):
    """The module path (a tuple of names) a file defines."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return tuple(parts)


def use_paths(tree):
    """Every path a `use` tree names: `a::{b, c::{d, e as f}}` gives a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+", "", tree)
    paths, depth, start, parts = [], 0, 0, []
    if "{" not in tree:
        return [re.sub(r"\bas\b.*$|as[A-Za-z_][A-Za-z0-9_]*$", "", tree)]
    head, _, rest = tree.partition("{")
    inner = rest[: rest.rindex("}")]
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    for part in parts:
        if part:
            paths.extend(head + sub for sub in use_paths(part))
    return paths


def crate_graph(src):
    files = {}
    for path in sorted(src.rglob("*.rs")):
        if path.parent.name == "bin" or (
            path == src / "main.rs" and (src / "lib.rs").exists()
        ):
            # Binaries beside a library are crates of their own.
            continue
        files[module_of(src, path)] = (path, strip(path.read_text(encoding="utf-8")))
    reexports = {}
    for module, (_, text) in files.items():
        for target, names in REEXPORT.findall(text):
            base = resolve_prefix(module, target.split("::"))
            if base is None:
                continue
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", names):
                if name != "self":
                    reexports[module + (name,)] = base
    graph = {}
    for module, (path, text) in files.items():
        targets = set()
        children = set(CHILD_MOD.findall(text))
        paths = [[root] + [n for n in rest.split("::") if n] for root, rest in PATH.findall(text)]
        for tree in USE.findall(text):
            paths.extend([n for n in p.split("::") if n] for p in use_paths(tree))
        # A bare path through a module this file declares (`search::rank()` in lib.rs).
        bare = re.compile(r"(?<![A-Za-z0-9_:])(" + "|".join(map(re.escape, children)) + r")::([A-Za-z_][A-Za-z0-9_:]*)") if children else None
        if bare:
            paths.extend(["self", child] + [n for n in rest.split("::") if n] for child, rest in bare.findall(text))
        for names in paths:
            if names and names[0] in children:
                names = ["self"] + names
            absolute = resolve_prefix(module, names)
            if absolute is None:
                continue
            target = defining_file(files, reexports, absolute)
            # A module reaching into its own submodules is the module tree, not an import.
            if target is not None and target[: len(module)] != module:
                targets.add(target)
        graph[module] = targets
    return {m: files[m][0] for m in files}, graph


def resolve_prefix(module, names):
    """An absolute module path for `crate::…`, `super::…` or `self::…` written in `module`."""
    if not names:
        return None
    root, rest = names[0], names[1:]
    if root == "crate":
        return tuple(rest)
    if root == "self":
        return module + tuple(rest)
    if root == "super":
        base = module[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
        return base + tuple(rest)
    return None


def defining_file(files, reexports, path):
    """The file whose module is the longest prefix of `path`, after re-exports."""
    for _ in range(8):
        if path in reexports:
            path = reexports[path]
            continue
        for cut in range(len(path), -1, -1):
            prefix = path[:cut]
            if cut < len(path) and prefix + (path[cut],) in reexports:
                path = reexports[prefix + (path[cut],)] + path[cut + 1 :]
                break
            if prefix in files:
                return prefix
        else:
            return None
    return None


def circles(graph):
    """Strongly connected components of more than one file (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def self_test():
    """The check finds a circle it is shown, and none where there is none."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        (src / "leases").mkdir(parents=True)
        (src / "lib.rs").write_text("mod board;\nmod chat;\nmod leases;\nmod task;\npub use task::Task;\n")
        (src / "task.rs").write_text("pub struct Task;\n")
        (src / "board.rs").write_text("use crate::leases::{self, grant};\nuse crate::Task;\n")
        (src / "leases" / "mod.rs").write_text(
            "mod tests;\n// crate::board::nothing\nlet s = \"crate::board::x\";\nuse crate::{chat::post, Task};\n"
        )
        (src / "leases" / "tests.rs").write_text("use super::*;\nuse crate::board::claim;\n")
        (src / "chat.rs").write_text("pub fn post() { crate::task::Task; }\n")
        _, graph = crate_graph(src)
        assert circles(graph) == [], graph
        # Now chat reaches the board through a nested use tree: board -> leases -> chat -> board.
        (src / "chat.rs").write_text("use crate::{board::{grant as g}, task::Task};\n")
        _, graph = crate_graph(src)
        assert circles(graph) == [[("board",), ("chat",), ("leases",)]], circles(graph)
    print("check-circles self-test passed")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    if "--edges" in sys.argv:
        for src in sorted(ROOT.glob("crates/*/src")):
            paths, graph = crate_graph(src)
            for component in circles(graph):
                for node in component:
                    inside = sorted(t for t in graph[node] if t in component)
                    print(paths[node].relative_to(ROOT), "->", [str(paths[t].relative_to(src)) for t in inside])
        return 0
    failed = False
    for src in sorted(ROOT.glob("crates/*/src")):
        paths, graph = crate_graph(src)
        for component in circles(graph):
            failed = True
            crate = src.parent.name
            names = ", ".join(str(paths[m].relative_to(src.parent)) for m in component)
            print(f"{crate}: files import each other in a circle: {names}")
    if failed:
        print("Break each circle: move what both sides need into a module they both import.")
        return 1
    print("no circle of files in any crate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
