"""A webhook receiver for the sink benchmark, run as a process of its own
(``python -m uvicorn tests.benchmarks.webhook_receiver:app``) so that it takes no CPU
from the process being measured: answers every request 200 and counts the rows it
received (``GET /count``)."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

#: What ``/remote`` adds to each request: a round trip to a receiver elsewhere.
REMOTE_DELAY_S = 0.005
_received = {"rows": 0}


async def hook(request: Request) -> Response:
    rows = len(json.loads(await request.body()))  # read before the count: others run meanwhile
    _received["rows"] += rows
    return Response(status_code=200)


async def remote(request: Request) -> Response:
    await asyncio.sleep(REMOTE_DELAY_S)
    return await hook(request)


async def count(request: Request) -> Response:
    del request
    return PlainTextResponse(str(_received["rows"]))


app = Starlette(routes=[Route("/hook", hook, methods=["POST"]),
                        Route("/remote", remote, methods=["POST"]), Route("/count", count)])
