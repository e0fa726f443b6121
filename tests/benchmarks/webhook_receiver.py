"""A webhook receiver for the sink benchmark, run as a process of its own
(``python -m uvicorn tests.benchmarks.webhook_receiver:app``) so that it takes no CPU
from the process being measured: answers every request 200 and counts the rows it
received (``GET /count``)."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

_received = {"rows": 0}


async def hook(request: Request) -> Response:
    _received["rows"] += len(json.loads(await request.body()))
    return Response(status_code=200)


async def count(request: Request) -> Response:
    del request
    return PlainTextResponse(str(_received["rows"]))


app = Starlette(routes=[Route("/hook", hook, methods=["POST"]), Route("/count", count)])
