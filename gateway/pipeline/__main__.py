"""``python -m gateway.pipeline archive|pipeline …`` (the same commands as ``hero-gateway``)."""

from gateway.pipeline.cli import main

raise SystemExit(main())
