"""Names that exist so SGLang's modules import, and refuse when anything uses them."""

from __future__ import annotations

from typing import Any

MESSAGE = ("torchvision stand-in (tests/cpu_stand_ins): only a CUDA build of torchvision "
           "is published for this torch, and it cannot load on CPU torch; image "
           "processing is not available on this host ({name})")


class Placeholder:
    """An attribute of the stand-in: any attribute of it is another placeholder (so
    `InterpolationMode.BICUBIC` in a default argument imports); calling it raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Placeholder:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return Placeholder(f"{self._name}.{attribute}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(MESSAGE.format(name=self._name))

    def __repr__(self) -> str:
        return f"<torchvision stand-in {self._name}>"

    # In a type annotation evaluated at class definition (`PILImageResampling |
    # InterpolationMode | int`, transformers' video processors, all imported when
    # AutoProcessor builds its mapping) a placeholder stands for "any type".
    def __or__(self, other: Any) -> Any:
        return Any

    def __ror__(self, other: Any) -> Any:
        return Any


def module_getattr(module: str) -> Any:  # a module's __getattr__
    def __getattr__(name: str) -> Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{module}.{name}")
    return __getattr__
