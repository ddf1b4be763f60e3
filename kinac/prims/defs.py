"""The definitions of the elementwise primitives (spec section 5), one ``define`` each.

Adding an elementwise primitive is one entry here (see ``docs/architecture.md``, "Adding a
primitive"): its formula over the base operations of :mod:`kinac.prims.scalar`, and, when the
exact reference is a math-library function, a careful f32 algorithm for generated code.
"""

from __future__ import annotations

import math

from kinac.prims.elementwise import define
from kinac.prims.scalar import (
    S,
    approx_div,
    eq,
    erf,
    exp,
    fabs,
    libm,
    log,
    maximum,
    minimum,
    power,
    sqrt,
    tanh,
    where,
)

SQRT_HALF = math.sqrt(0.5)

# ---- unary -----------------------------------------------------------------------------------
define("neg", "numeric", lambda x: -x, doc="``-x``")
define("exp", "float", exp, "expensive", doc="``e ** x``")
define("log", "float", log, "expensive", doc="natural logarithm")
define("sqrt", "float", sqrt, doc="square root")
define("rsqrt", "float", lambda x: 1 / sqrt(x), doc="``1 / sqrt(x)``")
define("tanh", "float", tanh, "expensive", doc="hyperbolic tangent")


def _sigmoid(x: S) -> S:
    return approx_div(1, 1 + exp(-x))


define("sigmoid", "float", _sigmoid, "expensive", doc="``1 / (1 + exp(-x))``")
define("relu", "numeric", lambda x: maximum(x, 0), doc="``max(x, 0)``")
define(
    "gelu",
    "float",
    lambda x: x * 0.5 * (1 + erf(x * SQRT_HALF)),
    "expensive",
    doc="exact GELU, ``x (1 + erf(x / sqrt 2)) / 2`` (``torch.nn.functional.gelu``)",
)
define("silu", "float", lambda x: approx_div(x, 1 + exp(-x)), "expensive", doc="``x sigmoid(x)``")
define("abs", "numeric", fabs, doc="``|x|``")
define("recip", "float", lambda x: 1 / x, doc="``1 / x``")
define("square", "numeric", lambda x: x * x, doc="``x * x``")
define("erf", "float", erf, "expensive", doc="the error function")


def _log1p_f32(x: S) -> S:
    """Goldberg's ``log(u) * x / (u - 1)`` with ``u = 1 + x``: the rounding of ``1 + x``
    cancels in the quotient, so the error is that of ``log`` plus a few ulp."""
    u = 1 + x
    d = u - 1
    r = where(eq(d, 0), x, log(u) * (x / d))
    return where(eq(u, math.inf), u, r)


LOG1P = define(
    "log1p",
    "float",
    lambda x: libm("log1p", x),
    "expensive",
    kernel_f32=_log1p_f32,
    doc="``log(1 + x)``, accurate for small ``x``",
)

# ---- binary ----------------------------------------------------------------------------------
define("add", "arith", lambda a, b: a + b, doc="``a + b`` (logical or on bool)")
define("sub", "arith", lambda a, b: a - b, doc="``a - b``")
define("mul", "arith", lambda a, b: a * b, doc="``a * b`` (logical and on bool)")
define(
    "div", "arith", lambda a, b: a / b, "weak_int_to_float", doc="``a / b``; ints: floor, x//0 = 0"
)
define("max", "arith", maximum, doc="elementwise maximum (NaN wins)")
define("min", "arith", minimum, doc="elementwise minimum (NaN wins)")
define("pow", "arith", power, "expensive", "weak_int_to_float", doc="``a ** b``")
define("lt", "compare", lambda a, b: a < b, doc="``a < b``")
define("le", "compare", lambda a, b: a <= b, doc="``a <= b``")
define("gt", "compare", lambda a, b: a > b, doc="``a > b``")
define("ge", "compare", lambda a, b: a >= b, doc="``a >= b``")
define("eq", "compare", eq, doc="``a == b``")
define(
    "softplus",
    "float",
    lambda x: maximum(x, 0) + LOG1P(exp(-fabs(x))),
    "expensive",
    doc="``log(1 + exp(x))`` (``torch.nn.functional.softplus``), without overflow",
)
