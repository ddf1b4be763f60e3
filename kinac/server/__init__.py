"""The build server: ``kinac serve`` keeps a workspace's engine, memo tables and imports
resident, and ``kinac build`` / ``kinac check`` in a fresh process forward to it.

Why: a fresh process pays ~0.6 s of imports (interpreter, kinac, xDSL) before a one-kernel
edit that a long-lived session rebuilds in ~0.1 s (BENCHMARKS.md, issue 19). As Bazel, Gradle
and Dune do, a server holds the warm state and a thin client forwards each request to it.

* :mod:`kinac.server.address`: the socket's name (workspace root, cache path, compiler
  version fingerprint) and the client's light reading of its command line;
* :mod:`kinac.server.protocol`: newline-delimited JSON frames (no pickle);
* :mod:`kinac.server.client`: the forwarding client, run before the CLI is imported;
* :mod:`kinac.server.serve`: the server (and its hook into ``kinac watch``).

This package's ``__init__``, ``address``, ``protocol`` and ``client`` import only the
standard library: they run on every ``kinac`` invocation. See docs/incremental.md, "Build
server".
"""
