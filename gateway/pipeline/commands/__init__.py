"""The bodies of ``hero-gateway archive``, ``pipeline run`` and ``pipeline synth``.

Each ``run_*(args) -> int`` resolves its settings (flags, ``HERO_*`` variables,
defaults: gateway/config/pipeline.py) and runs under ``common.guard``, so bad
input is one line on stderr with exit code 2 and an unusable environment 1.
``gateway/pipeline/cli.py`` registers them.
"""
