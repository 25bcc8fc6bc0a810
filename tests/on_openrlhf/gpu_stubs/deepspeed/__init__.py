"""An empty stand-in for deepspeed (tests/on_openrlhf/gpu_stubs/empty_gpu_module.py)."""

from empty_gpu_module import stand_in

stand_in(__name__)
