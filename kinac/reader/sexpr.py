"""The S-expression tree: tokens grouped into lists, with delimiter checking and recovery.

Built with an explicit stack, so arbitrarily deep input cannot overflow Python's stack; lists
nested deeper than :data:`MAX_DEPTH` are reported once and replaced by an error atom, which also
bounds the recursion of every later stage (the parser, the codec) on this tree.

Recovery rules, chosen so that one broken form does not swallow the rest of the file:

- A closing delimiter of the wrong kind closes the innermost list if no enclosing list opened
  with its partner (``(a b]``: K0102); if one did, the lists in between are reported unclosed
  and closed there.
- An opening ``(`` at column 1 whose head is ``defn``, ``import``, ``mesh`` or ``module``, met
  while lists are still open, starts a new top-level form: the open lists are reported
  unclosed (K0101) and closed just before it.
- A stray closing delimiter at top level is reported (K0103) and dropped.

Nodes carry character offsets; :meth:`Source.span` turns them into spans.
"""

from __future__ import annotations

from kinac.diag.model import Diagnostic
from kinac.reader.errors import make
from kinac.reader.lexer import SWALLOWS, tokenize
from kinac.reader.lexer import Token as SAtom  # atoms are the lexer's tokens: cheap tuples
from kinac.reader.lexer import new_token as _new_token
from kinac.reader.source import Source

MAX_DEPTH = 64
"""Deepest list nesting the reader accepts (real code stays far below)."""

TOP_HEADS = frozenset({"defn", "import", "mesh", "module"})
_PARTNER = {"(": ")", "[": "]"}


class SList:
    """A ``( … )`` or ``[ … ]`` list; ``bracket`` is the opening character.

    ``bad`` is set when the list or anything inside it had a reported error; ``broken`` when a
    delimiter inside it was left unclosed (its structure is then a guess, not worth parsing).
    ``end`` is after the closing delimiter, or after the last item when unclosed.
    """

    __slots__ = (
        *("bracket", "items", "start", "end", "line", "col", "eline", "ecol"),
        *("bad", "broken", "swallowed"),
    )

    def __init__(self, tok: SAtom) -> None:
        self.bracket = tok.kind
        self.items: list[SNode] = []
        self.start, self.end = tok.start, tok.end
        self.line, self.col, self.eline, self.ecol = tok.line, tok.col, tok.eline, tok.ecol
        self.bad = False
        self.broken = False
        self.swallowed = False  # holds a token that may have eaten its closing delimiter

    def close(self, last: SNode) -> None:
        """Set the end of this list to the end of ``last`` (its closing token or last item)."""
        self.end, self.eline, self.ecol = last.end, last.eline, last.ecol

    def __repr__(self) -> str:
        return f"SList({self.bracket!r}, {self.items!r})"


SNode = SAtom | SList


class _Reader:
    """The delimiter-matching state machine over one token stream."""

    def __init__(self, src: Source, tokens: list[SAtom], diags: list[Diagnostic]) -> None:
        self.src = src
        self.tokens = tokens
        self.diags = diags
        self.top: list[SNode] = []
        self.stack: list[SList] = []

    def pop(self, last: SNode) -> None:
        """Close the innermost open list, ending at ``last``; attach it to its parent."""
        lst = self.stack.pop()
        lst.close(last)
        if self.stack:
            parent = self.stack[-1]
            parent.items.append(lst)
            if lst.bad:
                parent.bad = True
                parent.broken = parent.broken or lst.broken
        else:
            self.top.append(lst)

    def unclosed(self, upto: int, at: int, why: str, where: str) -> None:
        """Report the lists ``stack[upto:]`` as unclosed; close them after their last items."""
        opened = self.stack[upto:]
        closers = "".join(_PARTNER[lst.bracket] for lst in reversed(opened))
        inner = opened[-1]
        n = len(opened)
        while len(self.stack) > upto:
            lst = self.stack[-1]
            lst.bad = lst.broken = True
            self.pop(lst.items[-1] if lst.items else lst)
        if all(lst.swallowed for lst in opened):
            return  # the unterminated string or annotation reported already explains it
        span = self.src.span
        sec = [(span(lst.start, lst.end), "also unclosed") for lst in opened[:-1]]
        sec.append((span(at, at), why))
        self.diags.append(
            make(
                "K0101",
                "unclosed delimiter" if n == 1 else f"{n} unclosed delimiters",
                span(inner.start, inner.start + 1),
                f"this `{inner.bracket}` is never closed",
                help=f"insert `{closers}` {where}",
                secondary=tuple(sec[-6:]),
            )
        )

    def run(self) -> list[SNode]:
        toks = self.tokens
        stack = self.stack
        top = self.top
        items = top  # the item list of the innermost open list (or the top level)
        n = len(toks)
        skip_to = 0
        for i, tok in enumerate(toks):
            if i < skip_to:
                continue
            kind = tok.kind
            if kind == "sym" or kind == "int" or kind == "kw":
                items.append(tok)
                continue
            if kind == "(" or kind == "[":
                if stack and tok.col == 1 and kind == "(" and i + 1 < n and self._top_head(i):
                    self.unclosed(
                        0,
                        tok.start,
                        "the next top-level form starts here",
                        f"where the form ends, before line {tok.line}",
                    )
                if len(stack) >= MAX_DEPTH:
                    skip_to = self._skip_deep(i)
                else:
                    lst = SList(tok)
                    stack.append(lst)
                    items = lst.items
                    continue
            elif kind == ")" or kind == "]":
                if stack and _PARTNER[stack[-1].bracket] == kind:  # the common case, inline
                    lst = stack.pop()
                    lst.end, lst.eline, lst.ecol = tok.end, tok.eline, tok.ecol
                    if stack:
                        parent = stack[-1]
                        parent.items.append(lst)
                        if lst.bad:
                            parent.bad = True
                            parent.broken = parent.broken or lst.broken
                    else:
                        top.append(lst)
                else:
                    self._close(tok)
            elif kind == "error" or kind == "junk":
                self._bad_token(tok)
            else:
                items.append(tok)
            items = stack[-1].items if stack else top
        if stack:
            self.unclosed(0, len(self.src.text), "the file ends here", "where the form ends")
        return top

    def _bad_token(self, tok: SAtom) -> None:
        """An already reported token: junk is dropped, errors stay as placeholder items."""
        if not self.stack:
            if tok.kind == "error":
                self.top.append(tok)
            return
        self.stack[-1].bad = True
        if tok.kind == "error":
            self.stack[-1].items.append(tok)
        if tok.value == SWALLOWS:
            for lst in self.stack:
                lst.swallowed = True

    def _top_head(self, i: int) -> bool:
        nxt = self.tokens[i + 1]
        return nxt.kind == "sym" and nxt.value in TOP_HEADS and nxt.start == self.tokens[i].end

    def _close(self, tok: SAtom) -> None:
        kind = tok.kind
        if not self.stack:
            self.diags.append(
                make(
                    "K0103",
                    f"unexpected closing `{kind}`",
                    self.src.span(tok.start, tok.end),
                    "nothing is open here",
                    help=f"delete this `{kind}`, or add the opening "
                    f"`{'(' if kind == ')' else '['}` it was meant to close",
                )
            )
            return
        want = _PARTNER[self.stack[-1].bracket]
        if kind == want:
            self.pop(tok)
            return
        opener = "(" if kind == ")" else "["
        for k in range(len(self.stack) - 2, -1, -1):
            if self.stack[k].bracket == opener:
                where = f"before this `{kind}`"
                self.unclosed(k + 1, tok.start, f"`{kind}` here closes an outer `{opener}`", where)
                self.pop(tok)
                return
        lst = self.stack[-1]
        self.diags.append(
            make(
                "K0102",
                f"mismatched closing delimiter: `{kind}` closes a `{lst.bracket}`",
                self.src.span(tok.start, tok.end),
                f"expected `{want}`",
                help=f"replace `{kind}` with `{want}`",
                secondary=((self.src.span(lst.start, lst.start + 1), "opened here"),),
            )
        )
        lst.bad = True
        self.pop(tok)

    def _skip_deep(self, i: int) -> int:
        """Skip the over-deep list opened by ``tokens[i]``; return the index after it."""
        toks = self.tokens
        first = toks[i]
        depth = 0
        j = i
        while j < len(toks):
            k = toks[j].kind
            if k == "(" or k == "[":
                depth += 1
            elif k == ")" or k == "]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        last = toks[min(j, len(toks) - 1)]
        self.diags.append(
            make(
                "K0111",
                f"lists nested more than {MAX_DEPTH} deep",
                self.src.span(first.start, first.end),
                "this list is too deep",
                help="split the expression with `let` bindings: `(let [(t (inner …))] (outer t))`",
            )
        )
        err = (
            *("error", None, first.start, last.end),
            *(first.line, first.col, last.eline, last.ecol),
        )
        top = self.stack[-1]
        top.items.append(_new_token(SAtom, err))
        top.bad = True
        if depth > 0:  # ran off the end of the file inside the skipped region
            top.broken = True
        return j + 1


def read_tree(src: Source) -> tuple[list[SNode], list[Diagnostic]]:
    """The top-level S-expressions of ``src`` and all lexical and delimiter diagnostics."""
    tokens, diags = tokenize(src)
    return _Reader(src, tokens, diags).run(), diags
