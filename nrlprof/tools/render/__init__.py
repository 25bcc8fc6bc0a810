"""Views of the figures: rich tables on a terminal, plain text, the self-contained HTML report and its SVG pictures."""
