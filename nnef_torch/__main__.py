"""`python -m nnef_torch`: the `nnef-torch` command line."""
from __future__ import annotations

import sys

from nnef_torch.cli import main

sys.exit(main())
