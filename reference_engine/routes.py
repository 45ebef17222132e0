"""Every route the reference engine serves: SGLang's native ones (`server`) and its
OpenAI-compatible ones (`openai_api`), with how each answers errors.
"""

from __future__ import annotations

from reference_engine import openai_api
from reference_engine import server as native
from reference_engine.web import OPENAI, Route


def routes() -> dict[tuple[str, str], Route]:
    native_routes = {
        ("GET", "/health"): Route(native.health),
        ("GET", "/health_generate"): Route(native.health),
        ("GET", "/ready"): Route(native.ready),
        ("GET", "/model_info"): Route(native.model_info),
        ("GET", "/get_model_info"): Route(native.model_info),
        ("GET", "/server_info"): Route(native.server_info),
        ("GET", "/get_server_info"): Route(native.server_info),
        ("GET", "/flush_cache"): Route(native.flush_cache, admin_optional=True),
        ("POST", "/flush_cache"): Route(native.flush_cache, admin_optional=True),
        ("POST", "/generate"): Route(native.generate),
        ("PUT", "/generate"): Route(native.generate),
    }
    openai = {key: Route(handler, errors=OPENAI) for key, handler in openai_api.ROUTES.items()}
    return {**native_routes, **openai}

