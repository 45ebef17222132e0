"""What reached vLLM's DFlash draft at run time (the folder the harness puts first on the
vLLM server's PYTHONPATH for DFLASH suites: sitecustomize.py, vllm_record.py). Nothing in
it runs in the harness process."""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
