"""Benchmarks: ``python -m benchmarks`` runs every ``bench_*`` module and prints its figures."""
