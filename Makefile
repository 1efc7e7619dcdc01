# The two set-up commands: `make run` and `make test`. Each bootstraps .venv by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test compat soak fuzz bench bench-proxy bench-quotas proxy-matrix pipeline docker-pipeline lint clean

# The headers wire/_decompress_scan.c is built with (compressed batches decompressed and checked in C) and the
# snappy library it loads at run time. Optional: without root or apt-get the extension is skipped (or, without
# libsnappy1v5, snappy alone) and Python decompresses (slower, same answers).
NATIVE_DEV_PACKAGES := liblz4-dev libzstd-dev zlib1g-dev libsnappy1v5

$(STAMP): pyproject.toml
	dpkg -s $(NATIVE_DEV_PACKAGES) >/dev/null 2>&1 \
		|| { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NATIVE_DEV_PACKAGES) >/dev/null; } \
		|| echo "no $(NATIVE_DEV_PACKAGES): compressed batches will be checked in Python"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/logway serve --listeners PLAINTEXT://127.0.0.1:9092 --advertised-listeners PLAINTEXT://127.0.0.1:9092 --log-dirs ./data

# The suite in TEST_WORKERS pytest-xdist workers (most of a test's time is waiting on a process, a JVM or a
# rebalance, not CPU, so more workers than cores pay off): a module per worker at a time, the modules sharing a
# JVM (Spark, Apache Kafka) or the image builds on one (conftest.py). A failed test runs once more (--reruns 1)
# and, if it then passes, is named at the end as flaky.
TEST_WORKERS ?= 4
PYTEST_ARGS ?=
test: $(STAMP)
	bash compat_tests/setup.sh $(VENV)
	$(BIN)/ruff check .
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --reruns 1 $(PYTEST_ARGS)

# The compatibility suite against any Kafka-compatible endpoint (Apache Kafka, another broker, a proxy):
# `make compat BOOTSTRAP=host:port` runs the client matrix (the cells that restart Logway skip), the ecosystem
# tests (Python and Kafka Streams exactly-once processors killed and restarted, Kafka Connect) and MirrorMaker 2
# between the endpoint and a Kafka 4.3.1 it starts, and writes COMPAT_REPORT/MATRIX.md (the client matrix) and
# COMPAT_REPORT/junit.xml (every test). The endpoint needs auto-creatable internal topics with replication 1.
BOOTSTRAP ?=
COMPAT_REPORT ?= compat-report
compat: $(STAMP)
	@test -n "$(BOOTSTRAP)" || { echo "usage: make compat BOOTSTRAP=host:port"; exit 2; }
	bash compat_tests/setup.sh $(VENV)
	mkdir -p $(COMPAT_REPORT)
	LOGWAY_TEST_BOOTSTRAP=$(BOOTSTRAP) LOGWAY_MATRIX_MD=$(COMPAT_REPORT)/MATRIX.md $(BIN)/pytest -q -n 0 \
		--junitxml=$(COMPAT_REPORT)/junit.xml $(PYTEST_ARGS) compat_tests/matrix compat_tests/ecosystem

# The fault tests at length: KILLS SIGKILLs under load (100 by default; `make test` runs 10), LOGWAY_KILL_SEED
# replays one; then the power-loss tests: a power loss before every file operation of the storage workload
# (`make test` draws 16) and POWER_LOSSES power losses of a broker under load (`make test` runs 2),
# LOGWAY_POWER_LOSS_SEED replays them.
KILLS ?= 100
POWER_LOSSES ?= 30
soak: $(STAMP)
	LOGWAY_KILLS=$(KILLS) $(BIN)/pytest -q -s tests/gateway/test_kill_under_load.py
	LOGWAY_POWER_LOSSES=all LOGWAY_POWER_LOSS_CYCLES=$(POWER_LOSSES) $(BIN)/pytest -q -s tests/power_loss

# The request fuzz test at length: FUZZ_FRAMES random and mutated frames (every API key and version served)
# against a gateway process, stopping after FUZZ_SECONDS whatever the count. FUZZ_SEED replays a run.
FUZZ_FRAMES ?= 1000000
FUZZ_SECONDS ?= 4800
FUZZ_SEED ?= $(shell date +%s)
fuzz: $(STAMP)
	LOGWAY_FUZZ_FRAMES=$(FUZZ_FRAMES) LOGWAY_FUZZ_SECONDS=$(FUZZ_SECONDS) LOGWAY_FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/pytest -q -s tests/gateway/test_request_fuzz.py

# The same job twice: on this package's format("logway-kafka"), then on Spark's own format("kafka").
pipeline: $(STAMP)
	$(BIN)/python -m logway.spark.pipeline
	$(BIN)/python -m logway.spark.pipeline --format kafka

# The compose file's Spark pipeline service alone, with its timings (`make test` runs it too, unless
# LOGWAY_SKIP_DOCKER_PIPELINE=1).
docker-pipeline: $(STAMP)
	$(BIN)/pytest -q -s tests/docker -k compose_pipeline

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)
	$(BIN)/python -m bench.tls $(BENCH_TLS_ARGS)
	$(BIN)/python -m bench.proxy $(BENCH_PROXY_ARGS)
	$(BIN)/python -m bench.cold_read $(BENCH_COLD_READ_ARGS)
	$(BIN)/python -m bench.durability $(BENCH_DURABILITY_ARGS)

# The proxy: throughput and latency through `logway proxy` vs direct and vs `tansu proxy` (also the last
# step of `make bench`; BENCH_PROXY_ARGS=--latest rewrites bench/LATEST.md's Proxy section); the client matrix.
bench-proxy: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.proxy $(BENCH_PROXY_ARGS)

# Client quotas held beside Apache Kafka (bench/quotas.py: 15 s flat-out clients on Kafka, Logway and the proxy).
bench-quotas: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.quotas --brokers kafka,logway,proxy $(BENCH_QUOTAS_ARGS)

proxy-matrix: $(STAMP)
	$(BIN)/python -m compat_tests.proxy_matrix logway,tansu,tansu-direct

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) data
