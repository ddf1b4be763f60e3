"""Runtimes: ``kinac.rt.host`` runs compiled entries on the CPU, ``kinac.rt.cuda`` on NVIDIA GPUs.

Neither is imported here: each loads its heavy dependencies (llvmlite, cuda-python) on use.
"""
