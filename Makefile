# The two set-up commands in README.md are `make run` and `make test`.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --quiet --disable-pip-version-check

.PHONY: run test install install-test

install:
	$(PIP) -e .

install-test:
	$(PIP) -e '.[test]'

run: install
	$(PYTHON) -m martlet.gateway.cli serve

test: install-test
	$(PYTHON) -m pytest
