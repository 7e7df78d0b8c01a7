"""tpuc: the `tpu` PyTorch device over PJRT plugins, backed by a C11 library."""

__version__ = "0.1.0"
