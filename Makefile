# The two set-up commands: `make run` and `make test`. Each bootstraps .venv by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench pipeline lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/logway serve --listeners PLAINTEXT://127.0.0.1:9092 --advertised-listeners PLAINTEXT://127.0.0.1:9092 --log-dirs ./data

test: $(STAMP)
	bash compat_tests/setup.sh $(VENV)
	$(BIN)/ruff check .
	$(BIN)/pytest -q

# The same job twice: on this package's format("logway-kafka"), then on Spark's own format("kafka").
pipeline: $(STAMP)
	$(BIN)/python -m logway.spark.pipeline
	$(BIN)/python -m logway.spark.pipeline --format kafka

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) data
