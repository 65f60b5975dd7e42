"""Process reward models: data formats and importers, tokenization, heads, losses, model, trainer, scoring,
metrics and the HTTP server (one concern per module; import from the modules)."""
