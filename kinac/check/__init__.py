"""Shape-typed checking of Kina (spec sections 3-6) and specialisation to concrete graphs.

A pure library: the pipeline wires these functions into the rule engine as per-defn queries.

* :func:`check_defn` checks one defn against its callees' signatures (``CheckEnv``).
* :func:`specialise` builds a :class:`kinac.tir.graph.Graph` at concrete dims (``SpecEnv``).
* :func:`bind_call_types` binds a signature to concrete argument types (the Python API).
* :func:`solve_formula` decides a canonical :class:`Formula` with Z3 (the engine caches it).
* :func:`format_types` prints the inferred type of every let binding.
* :func:`find_recursion` / :func:`calls_of` detect recursion over the call graph.
"""

from kinac.check.bind import CallBinding, bind_call_types, complete_dims
from kinac.check.codes import CODES
from kinac.check.formula import Formula, Rel, SolveResult
from kinac.check.infer import check_defn
from kinac.check.module import calls_of, find_recursion, primitive_shadow
from kinac.check.oblig import ObStats
from kinac.check.printer import format_types
from kinac.check.protocol import CheckEnv, GraphEnv, SpecEnv
from kinac.check.sig import DefnRef, SigInfo, analyse
from kinac.check.solver import solve_formula
from kinac.check.specialise import Specialised, specialise
from kinac.check.typed_ir import CheckedDefn
from kinac.check.types import SShape, SType

__all__ = [
    "CODES",
    "CallBinding",
    "CheckEnv",
    "CheckedDefn",
    "DefnRef",
    "Formula",
    "GraphEnv",
    "ObStats",
    "Rel",
    "SShape",
    "SType",
    "SigInfo",
    "SolveResult",
    "SpecEnv",
    "Specialised",
    "analyse",
    "bind_call_types",
    "calls_of",
    "check_defn",
    "complete_dims",
    "find_recursion",
    "format_types",
    "primitive_shadow",
    "solve_formula",
    "specialise",
]
