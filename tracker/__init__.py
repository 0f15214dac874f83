"""tracker: 3D particle tracking for microscopy time-lapses, on the CPU or a CUDA GPU."""

import logging

__version__ = "0.1.0"

# A library logs and leaves the showing to its application (the command line adds a handler on stderr).
logging.getLogger(__name__).addHandler(logging.NullHandler())
