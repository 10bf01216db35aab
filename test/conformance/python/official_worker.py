"""Run the official Python SDK EnvironmentWorker, unchanged, against the emulator.

Besides the SDK's own handling, every response body the client receives (JSON answers and each
server-sent event) is validated again against the response type the SDK asked for, with pydantic
in strict mode and extra fields forbidden, so a field the emulator adds, drops or shapes
differently from the SDK's types is reported (fields newer than this SDK release, which the
TypeScript SDK declares, are recorded instead, for the test to check against those types). Each check is recorded; a failing one is also raised
to the caller, as the SDK's `_strict_response_validation` would.

Environment: ANTHROPIC_BASE_URL, ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_ENVIRONMENT_KEY, WORKDIR,
MEMORY_SYNC_INTERVAL (seconds), REPORT (a JSON file written at exit). SIGTERM stops the worker.
"""

import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

import pydantic
from anthropic import AsyncAnthropic, __version__
from anthropic._base_client import AsyncAPIClient
from anthropic._exceptions import APIResponseValidationError
from anthropic.lib.environments import EnvironmentWorker

# Fields the API sends that anthropic 1.13.0 does not declare yet, because they are newer than it:
# the TypeScript SDK (1.14) declares them. They are let through the extra-field check and their
# values are recorded, so the test checks them against the TypeScript types instead.
NEWER_THAN_THIS_SDK = {
    ("BetaManagedAgentsSession", "agent.execution_identity"),
}

checks: list[dict[str, Any]] = []
_adapters: dict[Any, pydantic.TypeAdapter[Any]] = {}
_original = AsyncAPIClient._process_response_data


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or repr(t)


def _strict_process_response_data(self: Any, *, data: object, cast_to: Any, response: Any) -> Any:
    where = f"{response.request.method} {response.request.url.path}"
    if data is not None and cast_to is not object:
        adapter = _adapters.get(cast_to)
        if adapter is None:
            adapter = _adapters[cast_to] = pydantic.TypeAdapter(cast_to)
        name = _type_name(cast_to)
        try:
            # JSON mode: strict types (no coercion of numbers, booleans or strings), ISO dates read as
            # the API sends them, every required field present, and no field the type does not declare.
            adapter.validate_json(json.dumps(data), strict=True, extra="forbid")
            checks.append({"route": where, "type": name, "ok": True})
        except pydantic.ValidationError as err:
            problems = []
            newer: dict[str, Any] = {}
            for e in err.errors(include_url=False):
                loc = ".".join(str(p) for p in e["loc"])
                if e["type"] == "extra_forbidden" and (name, loc) in NEWER_THAN_THIS_SDK:
                    newer[loc] = e["input"]
                    continue
                problems.append({"loc": loc, "type": e["type"], "msg": e["msg"]})
            checks.append({"route": where, "type": name, "ok": not problems, "errors": problems, "newerFields": newer})
            if problems:
                print(f"strict validation failed for {where} as {name}: {problems}", file=sys.stderr, flush=True)
                raise APIResponseValidationError(response=response, body=data) from err
    return _original(self, data=data, cast_to=cast_to, response=response)


AsyncAPIClient._process_response_data = _strict_process_response_data  # type: ignore[method-assign]


async def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    client = AsyncAnthropic(api_key="not-used-by-the-worker", base_url=os.environ["ANTHROPIC_BASE_URL"], max_retries=2)
    worker = EnvironmentWorker(
        client,
        environment_id=os.environ["ANTHROPIC_ENVIRONMENT_ID"],
        environment_key=os.environ["ANTHROPIC_ENVIRONMENT_KEY"],
        workdir=os.environ["WORKDIR"],
        memory_sync_interval=float(os.environ.get("MEMORY_SYNC_INTERVAL", "5")),
    )
    task = asyncio.ensure_future(worker.run())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    print(f"python worker started (anthropic {__version__}, pydantic {pydantic.VERSION})", file=sys.stderr, flush=True)
    try:
        await task
    except asyncio.CancelledError:
        pass
    finally:
        with open(os.environ["REPORT"], "w", encoding="utf-8") as f:
            json.dump({"anthropic": __version__, "pydantic": pydantic.VERSION, "checks": checks}, f)


if __name__ == "__main__":
    asyncio.run(main())
