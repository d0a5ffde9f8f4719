"""The hand-written parts of the generated clients, as real modules.

``hero-gateway codegen`` copies these into ``clients/``: the ``_*.py`` modules
into the Python package ``hero_client`` (verbatim: they import each other
relatively, so they type-check here as they run there), and
``errors.js``, ``connection.js`` and ``stream.js`` into ``hero-client.js``
(their imports of each other dropped, since the client is one module), and
``runtime.d.ts`` into ``hero-client.d.ts``. Keeping them here, rather
than as text templates, is what lets ruff and mypy strict check the Python
runtime and TypeScript (``checkJs``) check the JS one as they are written.
Nothing in the gateway imports them.
"""
