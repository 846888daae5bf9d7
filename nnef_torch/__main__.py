import sys

from nnef_torch.cli import main

sys.exit(main())
