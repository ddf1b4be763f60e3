"""The definitions of the elementwise primitives (spec section 5), one ``define`` each.

Adding an elementwise primitive is one entry here (see ``docs/architecture.md``, "Adding a
primitive"): its formula over the base operations of :mod:`kinac.prims.scalar`, and, when the
exact reference is a math-library function, a careful f32 algorithm for generated code.
"""

from __future__ import annotations

import math

from kinac.prims.elementwise import define
from kinac.prims.rare import rare
from kinac.prims.scalar import (
    S,
    approx_div,
    eq,
    erf,
    exp,
    fabs,
    floor,
    fma,
    libm,
    log,
    maximum,
    minimum,
    poly,
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


# VJPs given here (the rest are derived from the formula, kinac.prims.dual): sigmoid and silu
# through ``out`` / a fresh sigmoid (the derived quotient rule overflows in exp(-x) for x << 0);
# relu as torch (no gradient at 0; the derived max would split it; a NaN input passes its
# gradient through, as torch's threshold_backward and kinac's binary max do).
define(
    "sigmoid",
    "float",
    _sigmoid,
    "expensive",
    doc="``1 / (1 + exp(-x))``",
    vjp=lambda x, out, g: (g * out * (1 - out),),
)
define(
    "relu",
    "numeric",
    lambda x: maximum(x, 0),
    doc="``max(x, 0)``",
    vjp=lambda x, out, g: (where(x <= 0, 0, g),),
)
define(
    "gelu",
    "float",
    lambda x: x * 0.5 * (1 + erf(x * SQRT_HALF)),
    "expensive",
    doc="exact GELU, ``x (1 + erf(x / sqrt 2)) / 2`` (``torch.nn.functional.gelu``)",
)


def _silu_vjp(x: S, out: S, g: S) -> tuple[S]:
    s = _sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


define(
    "silu",
    "float",
    lambda x: approx_div(x, 1 + exp(-x)),
    "expensive",
    doc="``x sigmoid(x)``",
    vjp=_silu_vjp,
)
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

define(
    "softplus",
    "float",
    lambda x: maximum(x, 0) + LOG1P(exp(-fabs(x))),
    "expensive",
    doc="``log(1 + exp(x))`` (``torch.nn.functional.softplus``), without overflow",
)

# sin and cos in generated f32 code: k = round(x 2/pi), r = x - k pi/2 with pi/2 in three f32
# parts through FMAs (Cody-Waite; the first step is exact and the parts sum to pi/2 within
# 1e-23, so r keeps ~1 ulp), then Cephes' minimax polynomials on [-pi/4, pi/4] and the quadrant
# k mod 4. Within 2 ulp for |x| <= 1e6, near multiples of pi/2 included (tests/test_prims_math).
# Beyond, the rounding of x 2/pi breaks that reduction (sin(1e9) was 13.3), so |x| > 1e6 and
# inf take a rarely taken path, the f64 sin rounded to f32 (exact to the largest float: glibc on
# the host, Payne-Hanek past 2^50 on the GPU); the ordinary range pays a compare and a branch
# (GPU) or an or-reduction of the compare (host: a versioned loop). kinac.prims.rare;
# docs/gpu-precision.md, "f32 sin/cos of large arguments".
_PIO2 = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15)  # sum: pi/2 to 1e-23
_SIN_P = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS_P = (2.443315711809948e-05, -1.388731625493765e-03, 4.166664568298827e-02)


def _sin_quadrant_f32(x: S, shift: int) -> S:
    """``sin(x + shift pi/2)`` (``shift`` 0: sin, 1: cos) for ``|x| <= 1e6``."""
    k = floor(x * 0.6366197466850281 + 0.5)
    r = fma(-k, _PIO2[0], x)
    r = fma(-k, _PIO2[1], r)
    r = fma(-k, _PIO2[2], r)
    z = r * r
    s = fma(r * z, poly(z, _SIN_P), r)
    c = fma(z * z, poly(z, _COS_P), 1 - z * 0.5)
    q = k + shift
    q = q - floor(q * 0.25) * 4  # 0..3
    v = where(eq(q - floor(q * 0.5) * 2, 1), c, s)
    return where(q >= 2, -v, v)


_LARGE = 1e6  # past this the f32 reduction above loses accuracy


def _sin_f32(x: S) -> S:
    s = rare(fabs(x) > _LARGE, lambda: libm("sin", x), _sin_quadrant_f32(x, 0))
    return where(eq(x, 0), x, s)  # sin(-0) = -0 (the polynomial gives +0)


def _cos_f32(x: S) -> S:
    return rare(fabs(x) > _LARGE, lambda: libm("cos", x), _sin_quadrant_f32(x, 1))


define(
    "sin",
    "float",
    lambda x: libm("sin", x),
    "expensive",
    kernel_f32=_sin_f32,
    doc="sine (generated f32 code: within 2 ulp for every finite x)",
)
define(
    "cos",
    "float",
    lambda x: libm("cos", x),
    "expensive",
    kernel_f32=_cos_f32,
    doc="cosine (generated f32 code: within 2 ulp for every finite x)",
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
