"""Benchmarks: Logway side by side with a peer broker (Tansu), driven by the same client processes."""
