# The two set-up commands in README.md are `make run` and `make test`.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore

# scripts/count_any.py fails above these counts of parameters and returns that mention Any:
# today's numbers, so no new Any appears at the gateway/engine boundary. Lower them as it gets types.
ANY_MAX = --max gateway=2 --max protocol=29 --max broker=5 --max engine=9

.PHONY: run test check install install-test install-lint check-ruff check-types check-imports check-any check-answers any-count

install:
	$(PIP) -e .

# PyFlink pins py4j, pyarrow and pandas the test extra cannot share: it gets a virtualenv of its
# own under .cache/ (made once, reused), with Flink's Kafka connector jar from Maven Central.
install-test:
	$(PIP) -e '.[test]'
	$(PYTHON) -m martlet.compat.reference.flink

# mypy also reads the client libraries that compat drives, so the test extra comes along.
install-lint:
	$(PIP) -e '.[test,lint]'

run: install
	$(PYTHON) -m martlet.cli serve

test: install-test
	$(PYTHON) -m pytest

# `make -k check` runs every check even when one fails.
check: check-ruff check-types check-imports check-any check-answers

check-ruff: install-lint
	$(PYTHON) -m ruff check .

check-types: install-lint
	$(PYTHON) scripts/installed.py mypy

check-imports: install-lint
	$(PYTHON) scripts/installed.py lint-imports

check-any:
	$(PYTHON) scripts/count_any.py $(ANY_MAX)

# protocol/answers.py is generated from kio's schemas and the served versions.
check-answers: install-test
	$(PYTHON) scripts/gen_answers.py --check

any-count:
	$(PYTHON) scripts/count_any.py
