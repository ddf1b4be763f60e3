"""The host lowering: ``kina`` kernels to loops over flat buffers to the ``llvm`` dialect to
LLVM IR text for the CPU. :mod:`~kinac.ir.host.pipeline` runs the passes, one per module and
named for what it converts: ``legalize_dtypes``, ``select_impl``, (the shared
:mod:`kinac.ir.fuse_kernels`), ``kina_to_loops`` (with ``kernel_loops``, ``loopgen`` and the
per-element ``scalar`` / ``scalar_algebra`` emitters), ``expand_math``, ``loops_to_llvm``,
``llvm_to_text``. The GPU lowering reuses the buffer plan and the scalar emitters from here.
"""
