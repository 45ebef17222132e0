"""Prefix caching: each engine's own flag, as data. `harness soak` runs with it on (EAGLE's
acceptance decays over hours with prefix caching, vllm-project/vllm #41838) and
`harness grid` sweeps it on and off (`[grid] prefix_caching`); both read this one table.

`on`: flags added to the launch line when none of them is there (empty: on by default);
`off`: flags that turn it off, refused in a soak (the soak would measure another server).
In the suite's row, since a suite is validated against it; light to import, no engine
code runs here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrefixCache:
    engine: str
    present: bool  # False: the engine has no prefix cache (the soak runs without one)
    on: tuple[str, ...]
    off: tuple[str, ...]
    source: str  # where the engine reads the flag, or why it has none

    def describe(self) -> str:
        if not self.present:
            return f"{self.engine}: no prefix cache ({self.source})"
        how = " ".join(self.on) if self.on else "on by default"
        return f"{self.engine}: prefix caching {how} ({self.source})"


PREFIX_CACHES: dict[str, PrefixCache] = {
    "sglang": PrefixCache(
        "sglang", True, (), ("--disable-radix-cache",),
        "sglang/srt/server_args.py: the radix prefix cache is on unless --disable-radix-cache "
        "(0.5.23: disable_radix_cache in srt/arg_groups/fields/memory.py; no flag turns it "
        "on)"),
    "vllm": PrefixCache(
        "vllm", True, ("--enable-prefix-caching",), ("--no-enable-prefix-caching",),
        "vllm/engine/arg_utils.py: --enable-prefix-caching, a BooleanOptionalAction whose "
        "default (None) is the model's own (CacheConfig.enable_prefix_caching), so both "
        "settings are said explicitly"),
    "reference": PrefixCache(
        "reference", False, (), (),
        "the reference engine keeps no prefix cache: _Run.execute "
        "(reference_engine/decoding.py) makes a fresh KV cache per request and "
        "prefills the whole prompt; nothing is shared between requests"),
}


def prefix_cache_for(kind: str) -> PrefixCache:
    """An engine kind's prefix cache; an engine the table lacks is said to have none."""
    return PREFIX_CACHES.get(kind, PrefixCache(kind, False, (), (),
                                               "no prefix-cache flag known to the harness"))


def with_prefix_cache(kind: str, extra_args: list[str]) -> tuple[list[str], str | None]:
    """The launch's extra args with prefix caching on, and the flag that turns it off
    when the suite gives one (the caller refuses it)."""
    cache = prefix_cache_for(kind)
    refused = next((arg for arg in extra_args
                    if arg.split("=", 1)[0] in cache.off), None)
    if refused is not None or not cache.present:
        return list(extra_args), refused
    missing = [flag for flag in cache.on if flag not in extra_args]
    return [*extra_args, *missing], None


def flags_for(kind: str, setting: str) -> tuple[str, ...]:
    """The flags that set prefix caching `setting` ("on" or "off") on an engine with one."""
    cache = prefix_cache_for(kind)
    return cache.on if setting == "on" else cache.off
