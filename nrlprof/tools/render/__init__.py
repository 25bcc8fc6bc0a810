"""Views of the tools' models: `console` (rich tables on a terminal), `html` (the self-contained report)."""
