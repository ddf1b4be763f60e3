"""The GPU lowering: ``kina`` kernels to NVPTX LLVM IR and a launch plan
(:class:`~kinac.artifacts.gpu.GpuLoweredEntry`). :mod:`~kinac.ir.gpu.pipeline` runs the
passes, one per module: ``select_impl`` (cuBLAS or generated), the shared
:mod:`kinac.ir.fuse_kernels`, ``fuse_rows``, ``fuse_epilogues``, then ``kernels_to_nvvm``
(with ``kernels``, ``rows``, ``read``, ``plan``, ``gemm`` and the per-element ``scalar``,
``scalar_algebra``, ``scalar_f64`` emitters over the ``emit`` IR-text builder).
"""
