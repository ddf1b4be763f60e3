"""Top-level forms of a file: ``module``, ``import``, ``mesh`` and ``defn`` dispatch.

Each form is parsed on its own: one with any error is reported and skipped, so the rest of the
file still parses. Imports and meshes number (in source order) into the file's ``top_spans``.
"""

from __future__ import annotations

from kinac.diag.model import Diagnostic
from kinac.reader.ast import Defn, DefnSpans, Import, Mesh
from kinac.reader.defn import DefnParser
from kinac.reader.errors import show, suggest
from kinac.reader.sexpr import SAtom, SList, SNode
from kinac.reader.sig import NAME, FormParser, describe, kind, sym
from kinac.reader.source import Source

_TOP_HELP = "top-level forms are `(module …)`, `(import …)`, `(mesh …)` and `(defn …)`"


class TopLevel:
    """The file-level state: module name, imports, meshes and their span table."""

    def __init__(self, src: Source, diags: list[Diagnostic]) -> None:
        self.src = src
        self.diags = diags
        self.top = FormParser(src, diags)
        self.module: str | None = None
        self.module_node: SNode | None = None
        self.imports: list[Import] = []
        self.meshes: list[Mesh] = []
        self.mesh_names: dict[str, SNode] = {}
        self.defns: list[Defn] = []
        self.defn_spans: list[DefnSpans] = []
        self.broken_defns: list[str] = []

    def run(self, forms: list[SNode]) -> None:
        """Parse every top-level form; a run of stray atoms gets one diagnostic."""
        stray: list[SAtom] = []
        for node in forms:
            if isinstance(node, SAtom):
                if node.kind != "error":
                    stray.append(node)
                continue
            self.stray(stray)
            self.form(node)
        self.stray(stray)

    def stray(self, atoms: list[SAtom]) -> None:
        if not atoms:
            return
        what = describe(atoms[0]) if len(atoms) == 1 else f"{len(atoms)} tokens"
        self.top.err(
            "K0112",
            f"unexpected {what} at top level",
            atoms[0],
            "not inside any form",
            _TOP_HELP + "; expressions go inside a defn body",
            last=atoms[-1],
        )
        atoms.clear()

    def form(self, node: SList) -> None:
        head = sym(node.items[0]) if node.items else None
        if node.broken:  # an unclosed delimiter inside: already reported, structure unreliable
            self.broken_defn(node, head)
            return
        if head == "defn":
            p = DefnParser(self.src, self.diags)
            p.failed = node.bad
            d = p.parse_defn(node)
            if d is not None and not p.failed:
                self.defns.append(d)
                self.defn_spans.append(p.span_table())
            else:
                self.broken_defn(node, head)
            return
        self.top.failed = node.bad
        if head == "import":
            self.import_(node)
        elif head == "mesh":
            self.mesh(node)
        elif head == "module":
            self.module_(node)
        elif head is not None:
            close = suggest(head, ("defn", "import", "mesh", "module"))
            hint = f"did you mean `({close} …)`? " if close else ""
            msg = f"unknown top-level form `({show(head)} …)`"
            self.top.err("K0112", msg, node, "not a top-level form", hint + _TOP_HELP)
        else:
            first = node.items[0] if node.items else None
            hint = ""
            if isinstance(first, SList) and sym(first.items[0] if first.items else None):
                hint = "remove the extra parentheses around the form; "
            if first is None:
                msg, hint = "empty list `()` at top level", "delete it; "
            else:
                msg = f"a top-level form must start with its keyword, found {describe(first)}"
            self.top.err("K0112", msg, node, "not a top-level form", hint + _TOP_HELP)

    def broken_defn(self, node: SList, head: str | None) -> None:
        """Remember the name of a defn dropped for errors, when it can be read."""
        name = sym(node.items[1]) if head == "defn" and len(node.items) > 1 else None
        if name is not None and NAME.match(name):
            self.broken_defns.append(name)

    def module_(self, node: SList) -> None:
        items = node.items
        name = sym(items[1]) if len(items) == 2 else None
        if name is None or not NAME.match(name):
            self.top.err(
                "K0113",
                "malformed module form",
                node,
                "expected `(module NAME)`",
                "write `(module nn)`: one name, starting with a letter",
            )
        elif self.module_node is not None:
            self.top.err(
                "K0113",
                "module name given twice",
                node,
                "second module form",
                "keep one `(module …)` form",
                ((self.module_node, "first given here"),),
            )
        elif not self.top.failed:
            self.module, self.module_node = name, node

    def import_(self, node: SList) -> None:
        items = node.items
        arg = items[1] if len(items) > 1 else None
        if arg is not None and self.top.silent(arg):
            return
        if len(items) != 2 or not isinstance(arg, SAtom) or arg.kind != "str":
            help = 'write `(import "std/nn.kina")`: one quoted path per import'
            if len(items) == 2 and (name := sym(arg)) is not None:
                help = f'quote the path: `(import "{name}")`'
            self.top.err("K0114", "malformed import", node, 'expected `(import "path")`', help)
            return
        path = str(arg.value)
        if (
            not path
            or path.startswith("/")
            or "\\" in path
            or path[1:2] == ":"
            or not path.isprintable()
        ):
            self.top.err(
                "K0114",
                f'import path "{path}" is not workspace-relative',
                arg,
                "bad path",
                "write a path relative to the workspace root, with `/` "
                'separators, e.g. `(import "lib/attention.kina")`',
            )
            return
        if not self.top.failed:
            self.imports.append(Import(self.top.nid(node), path))

    def mesh(self, node: SList) -> None:
        items = node.items
        t = self.top
        example = "`(mesh tp [4])` or `(mesh grid [2 4] :axes [dp tp])`"
        name = sym(items[1]) if len(items) > 1 else None
        if name is None or not NAME.match(name):
            t.err(
                "K0115",
                "mesh needs a name",
                items[1] if len(items) > 1 else node,
                "expected a name",
                "write " + example,
            )
            return
        sizes_node = items[2] if len(items) > 2 else None
        sizes: list[int] = []
        if not isinstance(sizes_node, SList) or not sizes_node.items:
            t.err(
                "K0115",
                f"mesh `{name}` needs its device counts",
                sizes_node or node,
                "expected `[N …]`",
                f"write `(mesh {name} [4])` for 4 devices",
            )
            return
        for s in sizes_node.items:
            if (
                isinstance(s, SAtom)
                and s.kind == "int"
                and isinstance(s.value, int)
                and s.value >= 1
            ):
                sizes.append(s.value)
            elif not t.silent(s):
                t.err(
                    "K0115",
                    f"mesh size must be a positive integer, found {describe(s)}",
                    s,
                    "not a device count",
                    "write the number of devices on each mesh axis: `[2 4]`",
                )
        axes: tuple[str, ...] | None = None
        i = 3
        while i < len(items):
            k = items[i]
            if not (isinstance(k, SAtom) and k.kind == "kw"):
                t.err(
                    "K0115",
                    f"unexpected {describe(k)} in mesh `{name}`",
                    k,
                    "not expected",
                    "the only option is `:axes [NAME …]`: " + example,
                )
                i += 1
                continue
            if i + 1 >= len(items) or kind(items[i + 1]) == "kw":
                t.err(
                    "K0124",
                    f"keyword `:{k.value}` has no value",
                    k,
                    "expected a value",
                    f"give it a value: `:{k.value} [dp tp]`",
                )
                i += 1
                continue
            if k.value != "axes":
                t.err(
                    "K0115",
                    f"unknown mesh option `:{k.value}`",
                    k,
                    "unknown option",
                    "the only option is `:axes [NAME …]`: " + example,
                )
            else:
                axes = self.mesh_axes(name, items[i + 1], len(sizes))
            i += 2
        if axes is None and len(sizes) != 1 and not t.failed:
            t.err(
                "K0115",
                f"mesh `{name}` has {len(sizes)} axes but no axis names",
                node,
                "expected `:axes [NAME …]`",
                f"name the axes: `(mesh {name} [{' '.join(map(str, sizes))}] :axes [{' '.join(f'a{j}' for j in range(len(sizes)))}])`",
            )
        first = self.mesh_names.get(name)
        if first is not None and not t.failed:
            t.err(
                "K0128",
                f"mesh `{name}` is declared twice in this file",
                items[1],
                "declared again here",
                "give each mesh its own name, or delete one declaration",
                secondary=((first, "first declared here"),),
            )
        if not t.failed:
            nid = t.nid(node)
            self.mesh_names[name] = items[1]
            self.meshes.append(Mesh(nid, name, tuple(sizes), axes or (name,), self.src.file))

    def mesh_axes(self, name: str, node: SNode, n: int) -> tuple[str, ...] | None:
        t = self.top
        names = [sym(a) for a in node.items] if isinstance(node, SList) else []
        if not isinstance(node, SList) or any(a is None or not NAME.match(a) for a in names):
            t.err(
                "K0115",
                f"`:axes` of mesh `{name}` must be a list of names",
                node,
                "expected `[NAME …]`",
                "write e.g. `:axes [dp tp]`",
            )
            return None
        out = tuple(str(a) for a in names)
        if len(out) != n:
            t.err(
                "K0115",
                f"mesh `{name}` has {n} sizes but {len(out)} axis name{'s' * (len(out) != 1)}",
                node,
                "count differs",
                "give exactly one axis name per size",
            )
            return None
        if len(set(out)) != len(out):
            dup = next(a for a in out if out.count(a) > 1)
            t.err(
                "K0115",
                f"axis name `{dup}` repeated in mesh `{name}`",
                node,
                "repeated",
                "give each axis a distinct name",
            )
            return None
        return out
