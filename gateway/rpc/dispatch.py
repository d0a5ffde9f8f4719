"""Answer one element of a frame: jsonrpcserver routes it, our methods answer it.

Each served method is registered with jsonrpcserver (``jsonrpc.route``) as a
function that checks the caller's access (before params: -32004/-32005 come
before -32602), checks the params against the contract, calls the handler
and returns jsonrpcserver's ``Success`` or ``Error``. Handlers stay plain
``(params, ctx) -> result`` functions.

Every element is answered on its own and ``dispatch`` never raises (except
cancellation), so one bad element never costs another its answer. Errors
reach the client only as codes and client-safe messages: a ``HeroError``
carries its own code and message, anything else is logged here with its
traceback and answered as a bare -32603 (it never reaches jsonrpcserver,
which would quote it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gateway import contract
from gateway.errors import HeroError
from gateway.rpc import codes, jsonrpc
from gateway.rpc.access import Access, scope_of
from gateway.rpc.context import CallContext
from gateway.rpc.messages import Element, Failure, Request, Response
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
        self._registered = {name: self._register(name, h) for name, h in self._methods.items()}

    @property
    def registered(self) -> dict[str, jsonrpc.Method]:
        """The methods as registered with jsonrpcserver: each takes the call's
        ``CallContext`` then the params (by name, or by position when the
        request sent an array), and returns its ``Success`` or ``Error``."""
        return self._registered

    async def dispatch(self, element: Element, ctx: CallContext) -> Response | None:
        """The answer to one element; None for a notification."""
        return (await self.dispatch_many((element,), ctx))[0]

    async def dispatch_many(
        self, elements: Sequence[Element | None], ctx: CallContext
    ) -> list[Response | None]:
        """Every element's answer, in order (None for a notification, and for a
        None element: a request refused without an answer). The Requests go
        to jsonrpcserver one by one and run concurrently (a lone one in this
        task); a Failure is its own answer."""
        requests = [e for e in elements if isinstance(e, Request)]
        if not requests:
            return [e if isinstance(e, Failure) else None for e in elements]
        answers = iter(await jsonrpc.route_many(requests, self._registered, ctx))
        return [
            next(answers) if isinstance(e, Request) else e if isinstance(e, Failure) else None
            for e in elements
        ]

    def _register(self, name: str, handler: Handler) -> jsonrpc.Method:
        """``handler`` as a jsonrpcserver method: access, then params, then the
        handler (-32004/-32005 come before -32602); its outcome as a result.

        It never raises (a raise would reach jsonrpcserver, which puts
        ``str(exc)`` in the response), and any params bind to it
        (``jsonrpc.accepts_any``): the contract's params check is the one that
        answers. The method's scope, params check and result check (tests
        only) are looked up here, once, not per call."""
        scope = self._scopes[name]
        params_check = self._params[name].check
        access = self._access
        observe = self._observe
        result_check = self._results.get(name)

        async def method(ctx: CallContext, /, *args: Any, **kwargs: Any) -> jsonrpc.Result:
            started = time.perf_counter()
            code: int | None = None
            try:
                who = access.enter(scope, ctx)
                checked = params_check(list(args) if args else kwargs)
                if access.restricts(who, scope):
                    checked = access.admit(who, checked)
                value = await handler(checked, ctx)
                if result_check is not None:
                    _check_result(name, result_check, value)
                result = jsonrpc.Success(value)
            except HeroError as exc:
                code = exc.code
                result = jsonrpc.failure(code, exc.message, exc.data)
            except jsonrpc.JsonRpcError as exc:
                code = exc.code
                result = jsonrpc.failure(code, exc.message, _data(exc))
            except Exception:
                log.exception("rpc method failed", extra={"method": name})
                code = codes.INTERNAL_ERROR
                result = jsonrpc.failure(code, codes.INTERNAL_ERROR_MESSAGE)
            if observe is not None:
                observe(name, time.perf_counter() - started, code)
            return result

        return jsonrpc.accepts_any(method)


def _check_result(method: str, validator: Schema, result: Any) -> None:
    """A result that breaks the method's result schema is a server bug: -32603."""
    found = validator.problems(result)
    if found:
        log.error("rpc result breaks the contract", extra={"method": method, "problems": found})
        raise HeroError()


def _data(exc: jsonrpc.JsonRpcError) -> Any:
    return None if exc.data is jsonrpc.NODATA else exc.data
