"""The benchmark harness behind `bench/run` and `bench/selftest`.

Modules: `bootstrap` (the venv the launchers re-exec into), `workloads` (what is run, the
default and quick profiles), `latte` (finding or installing latte, its command lines, reading
its JSON reports), `servers` (starting and stopping Cassandra, Helenus and the ceiling, and the
/proc sampler that measures their CPU and memory), `machine` (the machine and versions),
`runner` (the suite), `report` (report.md and the plots from results.json), `selftest`.
"""
