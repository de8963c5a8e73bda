"""The web console: static files from martlet/gateway/console/ (installed as package data).

GET / is console/index.html; GET /console/<path> any file below console/. Paths are checked
to stay inside the folder; a missing file (or a broker installed without the console) is a
404 {"error"} like any other.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path

from .parser import Request
from .response import HttpError, Response
from .routes import Router

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
FILE_BYTES_MAX = 16 << 20


def add_routes(router: Router, folder: Path = CONSOLE_DIR) -> None:
    async def index(_request: Request, _args: tuple[str, ...]) -> Response:
        return await console_file(folder, "index.html")

    async def file(_request: Request, args: tuple[str, ...]) -> Response:
        return await console_file(folder, args[0])

    router.add("GET", "/", index)
    router.add("GET", "/console/?", index)
    router.add("GET", r"/console/(.+)", file)


async def console_file(folder: Path, relative: str) -> Response:
    path = resolve(folder, relative)
    data = await asyncio.to_thread(_read, path)
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if content_type.startswith("text/") or content_type in ("application/javascript", "application/json"):
        content_type += "; charset=utf-8"
    return Response(200, data, content_type, {"Cache-Control": "no-cache"})


def resolve(folder: Path, relative: str) -> Path:
    """The file `relative` names below `folder`; HttpError 404 for anything else."""
    parts = relative.split("/")
    if any(part in ("", ".", "..") or "\\" in part or "\x00" in part for part in parts):
        raise HttpError(404, f"no console file {relative!r}")
    path = folder.joinpath(*parts)
    if not path.is_file():
        raise HttpError(404, f"no console file {relative!r}" if folder.is_dir() else "the web console is not installed")
    return path


def _read(path: Path) -> bytes:
    if path.stat().st_size > FILE_BYTES_MAX:
        raise HttpError(404, f"console file {path.name} is too large")
    return path.read_bytes()
