"""The `hermes` agent: Nous Research's Hermes `AIAgent` (PyPI `hermes-agent`) behind the one
adapter interface. Importing this package only checks that Hermes is installed, so a missing
extra is a one-line start-up error; Hermes itself is imported on the first turn or health check.
"""

from importlib.util import find_spec

if find_spec("run_agent") is None or find_spec("hermes_cli") is None:
    # The registry turns this into "needs the Python package 'hermes-agent' (pip install -e '.[hermes]')".
    raise ModuleNotFoundError("Hermes Agent is not installed", name="hermes-agent")

from adapters.hermes.agent import HermesAdapter

__all__ = ["HermesAdapter"]
