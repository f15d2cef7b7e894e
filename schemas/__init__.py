"""The bundled pipelines' schemas; the wheel installs them as
`pipelines/schemas/` (setup.py), so the pipelines find them there too."""
