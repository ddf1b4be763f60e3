"""The xDSL dialects kinac defines: ``kina`` (typed primitives on ranked tensors at concrete
dims: :mod:`~kinac.ir.dialects.kina`, :mod:`~kinac.ir.dialects.kina_struct`) and ``kbuf``
(library calls on buffers: :mod:`~kinac.ir.dialects.kbuf`). Operations only, no passes: both
the host (:mod:`kinac.ir.host`) and the GPU (:mod:`kinac.ir.gpu`) lowerings read them.
"""
