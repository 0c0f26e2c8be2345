"""Example apps shipped with streamstate (``streamstate run`` takes their paths)."""
