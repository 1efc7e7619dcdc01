"""The proxy's filter chain: sans-IO modules that see chosen requests and responses decoded (see base.py)."""
