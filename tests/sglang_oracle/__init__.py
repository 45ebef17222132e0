"""SGLang's own code as the oracle for the harness's SGLang facts (issue 9).

`extract` takes functions out of a cached SGLang wheel with `ast` and runs them on small
stand-ins (never importing SGLang, never copying its code into this repository);
`sglang_code.SGLang(version, block, decode_log_interval)` binds one release's speculative
bookkeeping; `simulate` plays synthetic requests through it. `tests/fake_sglang` serves its
figures over HTTP. Wheels: $HARNESS_SGLANG_WHEELS (`nox -s tests` fetches 0.5.17 and 0.5.23);
without one, these tests skip and the fake server refuses to start, saying which wheel.
`test_server_args` runs SGLang's own argument parser (`nox -s sglang_args`).
"""
