"""A test-only stand-in for torchvision, so that SGLang 0.5.23 imports on CPU torch.

SGLang imports torchvision at module level in its multimodal code
(`sglang/srt/multimodal/internvl_utils.py`, reached from `sglang/srt/configs/`), even
for a text model. PyPI publishes torchvision only as a CUDA build, whose extension needs
libtorch_cuda.so (`RuntimeError: operator torchvision::nms does not exist` on CPU torch),
so the CPU build drops it (harness/build/sglang_cpu.py). This package makes the imports
succeed and nothing more: every name is a placeholder that raises when called, so no
image path can run silently on it. It has no dist-info, so transformers'
`is_torchvision_available()` stays false.
"""

from torchvision._placeholder import module_getattr

__version__ = "0.0.0+harness-stand-in"
__getattr__ = module_getattr("torchvision")
