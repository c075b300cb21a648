"""Long responses: the rows (``rows``, also used by the regex tests) and their section."""
