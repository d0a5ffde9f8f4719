"""The JSON-RPC 2.0 transport of hero-gateway.

Framing, batches, validation against the OpenRPC contract, identity checks
and the method table. It knows no Redis key and makes no queue decision: every
method calls the supervisor through the ``Supervisor`` protocol in
``backends``. Nothing in this package imports redis (a layering rule, tested).

The core is sans-I/O: ``protocol.parse_frame`` turns a frame into elements,
``Dispatcher.dispatch_many`` answers a frame's elements (jsonrpcserver routes
each to the method registered with it), ``protocol.encode_*`` serialises,
so the WebSocket and HTTP layers own every socket and every task.
"""
