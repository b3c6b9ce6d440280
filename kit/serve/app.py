"""The FastAPI app of ``mkb serve``: the routes (:mod:`kit.serve.routes`) behind a guard that asks every request
but ``GET /v1/health`` for the bearer token (401) and refuses a body over the size limit (413) or without a
length (411) before it is read; validation errors are a 422 that names each wrong field.  The OpenAPI schema is
at ``/v1/openapi.json`` (behind the token too); there is no HTML documentation page."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from kit.serve import routes
from kit.serve.engine import Engine
from kit.serve.episodes import Episodes

#: paths any client may ask without the token
OPEN_PATHS = frozenset({"/v1/health"})
#: extra bytes a body may have beyond its candidate's files (the JSON around them)
BODY_OVERHEAD = 64 * 1024


def body_limit(max_file_bytes: int, files: int = 4) -> int:
    """The largest request body accepted (bytes): ``files`` candidate files of ``max_file_bytes``
    (``candidates.max_file_bytes``) and :data:`BODY_OVERHEAD` of JSON around them."""
    return files * max_file_bytes + BODY_OVERHEAD


class Guard:
    """ASGI middleware: the token (compared in constant time) and the body's declared length, checked before
    any route runs or any body byte is read."""

    def __init__(self, app: Any, token: str, max_body_bytes: int) -> None:
        self.app, self.token, self.max_body_bytes = app, token.encode(), max_body_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope)
        if refusal is not None:
            return await refusal(scope, receive, send)
        return await self.app(scope, receive, send)

    def _refusal(self, scope: dict) -> JSONResponse | None:
        headers = dict(scope.get("headers") or [])
        if scope["path"] not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not (given.startswith(b"Bearer ") and hmac.compare_digest(given[7:].strip(), self.token)):
                return JSONResponse({"detail": "a bearer token is needed (Authorization: Bearer <token>; "
                                               "the token mkb serve printed, or MKB_SERVE_TOKEN)"},
                                    401, headers={"WWW-Authenticate": "Bearer"})
        if scope["method"] in ("POST", "PUT", "PATCH"):
            length = headers.get(b"content-length")
            if length is None or not length.isdigit():
                return JSONResponse({"detail": "a body needs a Content-Length"}, 411)
            if int(length) > self.max_body_bytes:
                return JSONResponse({"detail": f"the body has {int(length)} bytes, over the limit of "
                                               f"{self.max_body_bytes} (candidates.max_file_bytes per file)"}, 413)
        return None


async def _invalid(_request: Request, exc: Exception) -> JSONResponse:
    """422: each wrong field named (``body.task_id: Field required``), without echoing the input back."""
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg", "")} for e in exc.errors()]
    detail = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors)
    return JSONResponse({"detail": detail, "errors": errors}, 422)


def create_app(engine: Engine, token: str, max_body_bytes: int) -> FastAPI:
    """The app over an opened ``engine``; ``token``: the bearer token every route but health asks for;
    ``max_body_bytes``: the largest body accepted (:func:`body_limit`)."""
    if not token:
        raise ValueError("token: the service needs a non-empty bearer token")
    app = FastAPI(title="mkb serve", summary="Verdicts on MNN kernel candidates for agents and trainers",
                  docs_url=None, redoc_url=None, openapi_url="/v1/openapi.json")
    app.state.engine = engine
    app.state.episodes = Episodes()
    app.include_router(routes.router)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_middleware(Guard, token=token, max_body_bytes=max_body_bytes)
    return app
