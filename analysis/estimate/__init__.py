"""How fast, and how sure: the formulas of docs/metrics.md per request, cell and repetition, the ratios
between arms at matched conditions, their intervals (repetition pairs, rounds), and who leads."""
