"""kassign.spark: sweep simulated scenario grids and analyse recorded timelines on PySpark.

``kassign sweep GRID.yaml --out DIR`` and ``kassign analyze EVENTS... --out DIR`` (see
:mod:`kassign.spark.cli`). The grid expansion (:mod:`kassign.spark.grid`) and per-task work
(:mod:`kassign.spark.tasks`) need no Spark; :mod:`kassign.spark.pipeline` and
:mod:`kassign.spark.report` need the ``spark`` extra (pyspark, pyyaml, matplotlib, tqdm).
"""
