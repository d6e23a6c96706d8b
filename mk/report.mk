# The HTML report of `placer simulate --html`, checked in a real browser. Included from the
# top-level Makefile (`-include mk/*.mk`), which defines PY; the default below applies otherwise.

PY ?= .venv/bin/python
CHROMIUM ?= chromium

.PHONY: html-check

html-check: install ## open `simulate --html` of the sample cluster in headless Chromium (apt-get install chromium); screenshot build/report/simulation.png
	CHROMIUM=$(CHROMIUM) $(PY) hack/browser_check.py --out build/report
