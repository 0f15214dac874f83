"""tracker: 3D particle tracking for microscopy time-lapses, on the CPU or a CUDA GPU."""

__version__ = "0.1.0"
