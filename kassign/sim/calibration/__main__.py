"""``python -m kassign.sim.calibration``: see :mod:`kassign.sim.calibration.cli`."""

import sys

from kassign.sim.calibration.cli import main

sys.exit(main())
