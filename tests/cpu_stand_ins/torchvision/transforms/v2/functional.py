"""torchvision stand-in: see torchvision/__init__.py."""

from torchvision._placeholder import module_getattr

__getattr__ = module_getattr("torchvision.transforms.v2.functional")
