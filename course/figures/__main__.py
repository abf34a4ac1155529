"""python -m course.figures: write every figure to docs/assets/figures/."""

import sys

from . import main

sys.exit(main(sys.argv[1:]))
