"""Mock `sglang` package: only `python3 -m sglang.launch_server` (see tests/mockgpu/engines)."""
__version__ = "0.5.4"
