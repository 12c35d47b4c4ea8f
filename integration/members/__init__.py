"""Consumer-group member programs run as subprocesses by :mod:`integration.driver`.

Each prints its rebalance callbacks, positions and processed offset ranges as JSON lines on stdout
(kassign's timeline schema, partitions as ``"topic:partition"``) and closes cleanly when its stdin
reaches end-of-file. The Java member is ``java/JavaMember.java``.
"""
