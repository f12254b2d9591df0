"""Commands around the worker, never inside it: the offline translation (`replay`),
the offline translation of the runtimes' session files (`importer`, `canonflow import`),
producing captures and following topics (`kafka_io`), the demo and its bundled
`samples/` (`demo`), the benchmarks (`bench`, `bench_long`, `bench_faust`), and the
Kubernetes topic manifests (`manifests`)."""

__all__: list[str] = []
