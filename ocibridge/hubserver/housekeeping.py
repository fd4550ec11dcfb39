"""What clients ask the Hub besides models, answered as the Hub does so that they go on quietly:
huggingface_hub (2.4) fetches ``/api/agent-harnesses`` once a day to tell whether an AI agent
runs it, and hf_xet (1.8, with ``HF_XET_TELEMETRY_ENABLED=1``) posts ``/v1/telemetry`` at the root of its
CAS host at the end of every transfer. Neither
needs a token at the Hub; here a refusal (401) would only fill the access log. serve keeps no
telemetry: the body is read (bounded) and dropped."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

#: the list of agents serve knows: none, but the variables every agent may set
#: (huggingface_hub's utils/_detect_agent.py reads ``standardEnvVars`` and ``harnesses``)
AGENT_HARNESSES = {"standardEnvVars": ["AI_AGENT", "AGENT"], "harnesses": {}}
#: bytes of a telemetry report read before the rest is left unread
TELEMETRY_MAX = 1 << 20


async def agent_harnesses(request: Request) -> Response:
    return JSONResponse(AGENT_HARNESSES)


async def telemetry(request: Request) -> Response:
    """Accepted and dropped; a report past :data:`TELEMETRY_MAX` is answered without the rest read."""
    seen = 0
    async for piece in request.stream():
        seen += len(piece)
        if seen > TELEMETRY_MAX:
            break
    return JSONResponse({})
