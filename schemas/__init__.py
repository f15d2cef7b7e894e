"""The bundled pipelines' schemas (a package so that they install with it)."""
