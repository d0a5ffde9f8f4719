"""Answer one element of a frame: look up, validate, call, map the outcome.

Every element is answered on its own and ``dispatch`` never raises (except
cancellation), so one bad element never costs another its answer. Errors
reach the client only as codes and client-safe messages: a ``HeroError``
carries its own code and message, anything else is logged here with its
traceback and answered as a bare -32603.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gateway import contract
from gateway.errors import HeroError
from gateway.rpc import codes
from gateway.rpc.access import Access, scope_of
from gateway.rpc.context import CallContext
from gateway.rpc.messages import Element, Failure, Request, Response, Success
from gateway.rpc.params import ParamsValidator
from gateway.validation import Schema

log = logging.getLogger("gateway.rpc")

#: A method handler: params already checked against the contract, by name.
Handler = Callable[[dict[str, Any], CallContext], Awaitable[Any]]
Methods = Mapping[str, Handler]

#: Told every served call's method, duration (s) and error code (None: success).
Observer = Callable[[str, float, int | None], None]


class Dispatcher:
    """A method table bound to the contract.

    Building one fails (``KeyError``) if a method is served that the contract
    does not describe, or describes without an ``x-scope``, so code and
    contract cannot drift at run time either. Every call passes ``access``
    (the method's declared scope) before its handler runs: handlers hold no
    access checks of their own.
    With ``check_results`` every result is validated against the method's
    result schema too (for tests: a mismatch is a server bug, answered -32603).
    """

    def __init__(
        self,
        methods: Methods,
        *,
        access: Access | None = None,
        check_results: bool = False,
        observe: Observer | None = None,
    ) -> None:
        self._observe = observe
        self._methods = dict(methods)
        self._access = access or Access()
        self._scopes = {name: scope_of(name) for name in self._methods}
        self._params = {name: ParamsValidator(name) for name in self._methods}
        self._results: dict[str, Schema] = {}
        if check_results:
            self._results = {
                name: contract.validator(contract.result_pointer(name)) for name in self._methods
            }

    @property
    def method_names(self) -> frozenset[str]:
        return frozenset(self._methods)

    async def dispatch(self, element: Element, ctx: CallContext) -> Response | None:
        """The answer to one element; None for a notification."""
        if isinstance(element, Failure):
            return element
        response = await self.call(element, ctx)
        return None if element.notification else response

    async def call(self, request: Request, ctx: CallContext) -> Response:
        started = time.perf_counter()
        response = await self._call(request, ctx)
        if self._observe is not None and request.method in self._methods:
            code = response.code if isinstance(response, Failure) else None
            self._observe(request.method, time.perf_counter() - started, code)
        return response

    async def _call(self, request: Request, ctx: CallContext) -> Response:
        handler = self._methods.get(request.method)
        if handler is None:
            return Failure(
                request.id,
                codes.METHOD_NOT_FOUND,
                codes.METHOD_NOT_FOUND_MESSAGE,
                {"method": request.method},
            )
        try:
            scope = self._scopes[request.method]
            who = self._access.enter(scope, ctx)
            params = self._params[request.method].check(request.params)
            params = await self._access.admit(scope, who, params)
            result = await handler(params, ctx)
            self._check_result(request.method, result)
        except HeroError as exc:
            return Failure(request.id, exc.code, exc.message, exc.data)
        except codes.JsonRpcError as exc:
            data = None if exc.data is codes.NODATA else exc.data
            return Failure(request.id, exc.code, exc.message, data)
        except Exception:
            log.exception("rpc method failed", extra={"method": request.method})
            return Failure(request.id, codes.INTERNAL_ERROR, codes.INTERNAL_ERROR_MESSAGE)
        return Success(request.id, result)

    def _check_result(self, method: str, result: Any) -> None:
        validator = self._results.get(method)
        if validator is None:
            return
        found = validator.problems(result)
        if found:
            log.error("rpc result breaks the contract", extra={"method": method, "problems": found})
            raise HeroError()
