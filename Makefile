# Two commands for users: `make lab` and `make test` (see README.md). Everything else is a helper.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8888
LAB_ARGS ?=
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: lab test check install lint book checkpoints clean

# Re-install only when the pins or the package metadata changed.
$(STAMP): requirements.txt pyproject.toml jupyter-config/jupyter_nbconvert_config.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	@mkdir -p $(VENV)/etc/jupyter && cp jupyter-config/jupyter_nbconvert_config.json $(VENV)/etc/jupyter/
	@touch $(STAMP)

install: $(STAMP)

## make lab: set up, then start JupyterLab on notebooks/ (no browser window when headless)
lab: $(STAMP) deb-dataset-fashion-mnist
	@echo "Starting JupyterLab on notebooks/ — open the URL printed below (Ctrl-C to stop)."
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
		$(if $(DISPLAY),,--no-browser) $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

## make test: set up, then lint and run every test (unit, Triton interpreter, notebooks, browser)
test: $(STAMP) deb-chromium deb-dataset-fashion-mnist
	$(VENV)/bin/ruff check ssog_lab tests scripts
	SSOG_LAB_FAST=1 $(PY) -m pytest tests -p no:cacheprovider --durations=15

## make check: the inner loop: lint and the unit tests (no browser, no notebooks, no multi-process or training runs)
check: $(STAMP)
	$(VENV)/bin/ruff check ssog_lab tests scripts
	SSOG_LAB_FAST=1 $(PY) -m pytest tests -p no:cacheprovider -q -m "not slow and not browser" \
		--ignore=tests/test_browser.py --ignore=tests/test_notebook_render.py

lint: $(STAMP)
	$(VENV)/bin/ruff check ssog_lab tests scripts

## make book: execute the nine notebooks and render them to site/, a static course that works offline: index.html
## is the course map; each live figure keeps a slider over precomputed positions of its main control
book: $(STAMP) deb-dataset-fashion-mnist
	$(PY) -m ssog_lab book --out site $(BOOK_ARGS)

# deb-PACKAGE: install a Debian package when missing (root: apt-get; otherwise a message, and the tests that need
# it skip). chromium: the real-browser test (Playwright's own download cannot work offline); dataset-fashion-mnist:
# the Fashion-MNIST files (/usr/share/datasets/fashion-mnist), the accuracy data set.
deb-%:
	@dpkg-query -W -f='$${Status}' $* 2>/dev/null | grep -q "ok installed" || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $* >/dev/null; \
	  else echo "$* not installed and not root: the tests that need it will be skipped (sudo apt-get install $*)"; fi; }

## make checkpoints: retrain the shipped nano checkpoints: steered SSoG on the embedded digits and on Fashion-MNIST,
## and on the Fashion-MNIST subset of docs/results/ode_solutions.md the fixed-SSoG ODE model that is a solution of its
## ODE with its one-RK4-step twin (minutes each: each data/checkpoints/*.json records its training time; the ODE
## model, exported from its study run, has its time in docs/results/ode_solutions.csv)
checkpoints: $(STAMP) deb-dataset-fashion-mnist
	$(PY) -m ssog_lab train --preset nano --depth discrete --mixer ssog-steered --set ssog_heads=8 --dataset mnist5k --augment --epochs 14 --batch-size 64 --lr 2e-3 --warmup-epochs 0.5 --atom-lr-scale 1 --set ssog_init_spread=2 --set ssog_init_amplitudes=blur --seed 0 --log-every 20 --no-progress --overwrite --out runs/nano-ssog-steered-mnist5k --export data/checkpoints/nano_ssog_steered_mnist5k.pt
	OMP_NUM_THREADS=1 $(PY) -m ssog_lab train --preset nano --depth discrete --mixer ssog-steered --set ssog_heads=2 --set image_size=28 --set patch_size=4 --dataset fashion-mnist --augment --epochs 12 --batch-size 128 --lr 2e-3 --atom-lr-scale 10 --set ssog_init_spread=2 --set ssog_init_amplitudes=blur --warmup-epochs 1 --weight-decay 0.05 --seed 0 --log-every 100 --no-progress --overwrite --out runs/nano-ssog-steered-fashion --export data/checkpoints/nano_ssog_steered_fashion.pt
	OMP_NUM_THREADS=1 $(PY) -m ssog_lab.experiments.ode_solutions checkpoint

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
